// Keeps a dashboard page live: when the server says something changed (GET /ui/live,
// server-sent events), fetch this page again and swap its <main> in place. The page works
// without this script; it only saves the reload. Nothing is swapped while a field inside
// <main> has the focus, so a half-typed filter is never lost.
(() => {
  const main = document.getElementById("main");
  if (!main || !("EventSource" in window)) return;
  let busy = false;
  let again = false;
  const editing = () => {
    const active = document.activeElement;
    return active && main.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName);
  };
  const refresh = async () => {
    if (busy || editing()) { again = true; return; }
    busy = true;
    try {
      const response = await fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (response.redirected && new URL(response.url).pathname === "/ui/login") {
        location.assign(response.url);
        return;
      }
      if (response.ok) {
        const page = new DOMParser().parseFromString(await response.text(), "text/html");
        const fresh = page.getElementById("main");
        if (fresh) {
          // Copied out first: adopting a node takes it out of the live childNodes list.
          const nodes = Array.from(fresh.childNodes);
          main.replaceChildren(...nodes.map((node) => document.adoptNode(node)));
          main.dataset.refreshed = String(Date.now());
        }
      }
    } catch (_) {
      // Offline for a moment: the next change tries again.
    } finally {
      busy = false;
      if (again) { again = false; setTimeout(refresh, 300); }
    }
  };
  // From the version this page was rendered at: a change since then is sent at once.
  const live = new EventSource("/ui/live?since=" + encodeURIComponent(document.body.dataset.liveSince || ""));
  live.addEventListener("change", refresh);
  live.addEventListener("open", () => { document.documentElement.dataset.live = "connected"; });
})();
