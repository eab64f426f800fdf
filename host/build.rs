//! `sqlx::migrate!` embeds `migrations/` at compile time; without this line a migration added
//! since the last build is not seen until some source file of the crate changes.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
