//! `taskexec secrets rotate`: re-encrypt every secret, of every tenant, under the current key.

use anyhow::Context;

use super::{database_location, init_logging, load_cipher, open_store};
use crate::config::RotateArgs;
use crate::store::PageKey;
use crate::store::PageRequest;

pub async fn rotate(args: RotateArgs) -> anyhow::Result<()> {
    init_logging(&args.log)?;
    let location = database_location(&args.database)?;
    let cipher = load_cipher(&location, &args.keys)?;
    let store = open_store(&location, &args.database, false).await?;
    store.migrate().await.context("migration failed")?;

    let (mut resealed, mut current, mut changed_meanwhile) = (0u64, 0u64, 0u64);
    let mut secrets = Vec::new();
    let mut tenants = PageRequest { after: None, limit: 200, ..Default::default() };
    loop {
        let page_of_tenants = store.tenant_list(&tenants).await?;
        let Some(last) = page_of_tenants.last() else { break };
        tenants.after = Some(PageKey { created_at: last.created_at, key: last.name.clone() });
        for tenant in &page_of_tenants {
            let mut page = PageRequest { after: None, limit: 200, ..Default::default() };
            loop {
                let of_tenant = store.secret_list(&tenant.name, &page).await?;
                let Some(last) = of_tenant.last() else { break };
                page.after = Some(PageKey { created_at: last.created_at, key: last.name.clone() });
                secrets.extend(of_tenant);
            }
        }
    }
    for secret in &secrets {
        if !cipher.needs_reseal(&secret.encrypted_value) {
            current += 1;
            continue;
        }
        let value = cipher
            .open(&secret.name, &secret.encrypted_value)
            .with_context(|| format!("cannot open secret '{}'", secret.name))?;
        let sealed = cipher.seal(&secret.name, &value);
        // Compare-and-set: a value rotated by a user meanwhile is already under the new key.
        if store.secret_reencrypt(&secret.name, &secret.encrypted_value, &sealed).await? {
            resealed += 1;
        } else {
            changed_meanwhile += 1;
        }
    }
    println!(
        "Re-encrypted {resealed} secret(s) under key {}; {current} already were; {changed_meanwhile} changed meanwhile (already current).",
        cipher.current_key_id()
    );
    Ok(())
}
