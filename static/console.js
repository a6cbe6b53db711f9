/* AgentOps console: bulk selection, confirm dialogs, countdowns, live updates (keys.js: lists and keys).
   All behaviour lives here (no inline scripts or on*= attributes, so a strict CSP can apply). */
(function () {
  "use strict";
  var body = document.body;
  var seenSeq = null;

  function typing(el) {
    return el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
  }

  /* ---------- Cancel closes its dialog; bulk selection (keys.js: x selects the focused row) ---------- */
  document.addEventListener("click", function (e) {
    var closer = e.target.closest("[data-close-dialog]");
    if (closer && closer.closest("dialog")) { e.preventDefault(); closer.closest("dialog").close(); }
  });

  function selectionBoxes() { return Array.prototype.slice.call(document.querySelectorAll("#bulk-form input[name=run]")); }
  function updateSelection() {
    var form = document.getElementById("bulk-form");
    if (!form) { return; }
    var all = form.querySelector("[data-select-all]");
    var chosen = selectionBoxes().filter(function (b) { return b.checked; }).length;
    var label = form.querySelector("[data-selected-count]");
    if (label) { label.textContent = all && all.checked ? "all matching" : chosen + " selected"; }
    var submit = form.querySelector("[data-bulk-submit]");
    if (submit) { submit.disabled = !(chosen || (all && all.checked)); }
  }
  document.addEventListener("change", function (e) {
    if (e.target.matches("[data-select-page]")) {
      selectionBoxes().forEach(function (b) { b.checked = e.target.checked; });
    }
    if (e.target.matches("[data-select-all]")) {
      selectionBoxes().forEach(function (b) { b.disabled = e.target.checked; });
    }
    if (e.target.closest("#bulk-form")) { updateSelection(); }
  });

  /* Polling must not wipe a selection or a half-typed decision. */
  function busy(el) {
    if (!el) { return false; }
    if (el.querySelector("input[name=run]:checked, [data-select-all]:checked, details.edit[open]")) { return true; }
    if (el.contains(document.activeElement) && typing(document.activeElement)) { return true; }
    /* Only what a person typed counts: the forms' hidden CSRF inputs always have a value. */
    return Array.prototype.some.call(el.querySelectorAll(
      "form[data-reject] input[name=reason], form[data-approve] input[name=confirm]"), function (i) { return i.value; });
  }
  document.addEventListener("htmx:beforeRequest", function (e) {
    var el = e.detail.elt;
    if (el && el.hasAttribute("data-poll") && busy(el)) { e.preventDefault(); }
  });

  /* ---------- confirm dialog ---------- */
  document.addEventListener("htmx:afterSwap", function (e) {
    var target = e.detail.target;
    if (target && target.id === "confirm-body") {
      var dialog = document.getElementById("confirm");
      if (!dialog.open) { dialog.showModal(); }
      restoreReason();
      var first = target.querySelector("[data-autofocus]");
      if (first) { first.focus(); }
    }
    updateSelection();
    startCountdowns();
  });
  document.addEventListener("htmx:afterSettle", function () {
    var live = document.getElementById("live");
    if (!live) { return; }
    var seq = live.getAttribute("data-seq");
    if (seenSeq !== null && seq !== seenSeq) { runChanged(); }
    seenSeq = seq;
  });
  /* A typed reason is never lost to Esc: the first Esc asks, and a reason left behind comes
     back when the same dialog opens again. */
  var confirmDialog = document.getElementById("confirm");
  var keptReason = {action: "", text: ""};
  function dialogReason() { return confirmDialog.querySelector("form[data-confirm-form] textarea[name=reason]"); }
  if (confirmDialog) {
    confirmDialog.addEventListener("cancel", function (e) {
      var reason = dialogReason();
      if (!reason || !reason.value.trim() || confirmDialog.hasAttribute("data-asked")) { return; }
      e.preventDefault();
      confirmDialog.setAttribute("data-asked", "");
      var note = document.createElement("p");
      note.className = "msg small";
      note.setAttribute("role", "alert");
      note.setAttribute("data-esc-note", "");
      note.textContent = "Close without acting? Press Esc again or Cancel. Your reason is kept for when you reopen this action.";
      reason.closest("label").insertAdjacentElement("afterend", note);
      reason.focus();
    });
    confirmDialog.addEventListener("close", function () {
      var reason = dialogReason();
      if (reason && reason.value.trim()) {
        keptReason = {action: reason.form.getAttribute("action"), text: reason.value};
      }
      confirmDialog.removeAttribute("data-asked");
      document.getElementById("confirm-body").innerHTML = "";
    });
  }
  function restoreReason() {
    var reason = dialogReason();
    if (reason && !reason.value && keptReason.text && reason.form.getAttribute("action") === keptReason.action) {
      reason.value = keptReason.text;
    }
  }
  function runChanged() {
    var dialog = document.getElementById("confirm");
    var banner = document.getElementById("changed-banner");
    if (banner && dialog && dialog.open) {
      banner.hidden = false;
      var inner = dialog.querySelector("form");
      if (!inner) { return; }
      var note = inner.querySelector(".changed-note");
      if (!note) {
        note = document.createElement("p");
        note.className = "msg msg-error changed-note";
        note.setAttribute("role", "alert");
        inner.insertBefore(note, inner.firstChild);
      }
      note.textContent = (lastChange ? lastChange.text + " just now. " : "This run changed since you opened this dialog. ") +
        "Check the panel before confirming.";
    }
  }

  /* ---------- countdowns ---------- */
  function fmt(ms) {
    var s = Math.floor(ms / 1000), d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    if (d) { return d + "d " + h + "h"; }
    if (h) { return h + "h " + m + "m"; }
    return m + "m " + (s % 60) + "s";
  }
  function startCountdowns() {
    document.querySelectorAll("time[data-countdown]").forEach(function (t) {
      var at = Date.parse(t.getAttribute("datetime"));
      if (isNaN(at)) { return; }
      var left = at - Date.now();
      /* "expires in 13m 48s", then the element's own word once due ("expired") */
      t.textContent = left > 0 ? (t.dataset.prefix || "in") + " " + fmt(left) : (t.dataset.past || "now");
      t.classList.toggle("expired", left <= 0);
    });
  }
  setInterval(startCountdowns, 1000);

  /* ---------- live updates over websockets (polling stays on as the fallback) ---------- */
  function connect(path, attempt) {
    if (!("WebSocket" in window) || attempt > 5) { return; }
    var ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + path);
    var dot = document.getElementById("live-dot");
    ws.onopen = function () {
      attempt = 0;
      if (dot) { dot.classList.add("on"); dot.title = "Live updates: connected"; }
      liveOff(false);
    };
    ws.onclose = function () {
      if (dot) { dot.classList.remove("on"); dot.title = "Live updates: polling"; }
      liveOff(true);
      setTimeout(function () { connect(path, attempt + 1); }, 1000 * Math.pow(2, attempt));
    };
    ws.onmessage = function (msg) {
      var data = JSON.parse(msg.data);
      if (data.type === "run.changed") {
        if (data.text) { liveNote(data); }
        refreshSoon();
      } else if (data.type === "presence") {
        showPresence(data.users || []);
      } else if (data.type === "model.text") {
        showModelText(data);
      }
    };
  }
  /* Without live updates (no Redis, a proxy that drops websockets) say so in words, not only
     with a grey dot: what a person sees may be up to one poll old. */
  function liveOff(off) {
    var banner = document.getElementById("live-off");
    if (!banner) { return; }
    var every = parseFloat(banner.getAttribute("data-poll-s") || "0");
    banner.textContent = "Live updates are off: " +
      (every > 0 ? "this page checks for changes every " + every + " s"
                 : "reload to see changes");
    banner.title = "The server cannot push changes right now (is Redis reachable?). " +
      (every > 0 ? "This page polls instead." : "Polling is off, so this page does not refresh by itself.");
    banner.hidden = !off;
  }
  function showModelText(data) {
    var el = document.getElementById("model-stream");
    if (!el) { return; }
    var key = data.step + ":" + data.turn;
    if (el.getAttribute("data-turn") !== key) { el.textContent = ""; el.setAttribute("data-turn", key); }
    el.hidden = false;
    el.textContent += data.text || "";
  }
  /* Many changes in a burst cause one refresh at once and at most one more 300 ms later. */
  var refreshTimer = null, lastRefresh = 0;
  function refreshSoon() {
    if (typeof htmx === "undefined" || refreshTimer) { return; }
    var wait = Math.max(0, lastRefresh + 300 - Date.now());
    refreshTimer = setTimeout(function () {
      refreshTimer = null;
      lastRefresh = Date.now();
      htmx.trigger(body, body.getAttribute("data-run") ? "run-changed" : "queue-changed");
    }, wait);
  }
  /* Who did what: "alice retried this run" (on the queue and inbox, with the run's id). */
  var lastChange = null;
  function liveNote(data) {
    var run = body.getAttribute("data-run");
    if (run && data.run_id !== run) { return; }
    lastChange = {text: data.text, at: Date.now()};
    var note = document.getElementById("live-note");
    if (note) {
      note.textContent = run ? data.text : data.text.replace("this run", "run " + data.run_id.slice(0, 8));
      note.hidden = false;
    }
    runChanged();
  }
  function showPresence(users) {
    var el = document.getElementById("presence");
    if (!el) { return; }
    el.textContent = "";
    el.hidden = !users.length;
    if (!users.length) { return; }
    el.appendChild(document.createTextNode("Also viewing:"));
    users.forEach(function (u) {
      var span = document.createElement("span");
      span.className = "viewer";
      span.textContent = u;
      el.appendChild(span);
    });
  }

  /* ---------- start ---------- */
  document.addEventListener("DOMContentLoaded", function () {
    startCountdowns();
    updateSelection();
    var live = document.getElementById("live");
    if (live) { seenSeq = live.getAttribute("data-seq"); }
    if (body.getAttribute("data-ws")) { connect(body.getAttribute("data-ws"), 0); }
  });
})();
