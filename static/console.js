/* AgentOps console: keyboard triage, selection, confirm dialogs, countdowns, live updates.
   All behaviour lives here (no inline scripts or on*= attributes, so a strict CSP can apply). */
(function () {
  "use strict";
  var body = document.body;
  var focusedId = null;
  var seenSeq = null;

  function rows() { return Array.prototype.slice.call(document.querySelectorAll("[data-list] [data-row]")); }
  function typing(el) {
    return el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
  }
  function focusRow(index) {
    var all = rows();
    if (!all.length) { return; }
    index = Math.max(0, Math.min(index, all.length - 1));
    all.forEach(function (r) { r.classList.remove("is-focused"); });
    var row = all[index];
    row.classList.add("is-focused");
    focusedId = row.getAttribute("data-id") || String(index);
    row.scrollIntoView({ block: "nearest" });
  }
  function currentIndex() {
    var all = rows();
    for (var i = 0; i < all.length; i++) { if (all[i].classList.contains("is-focused")) { return i; } }
    return -1;
  }
  function currentRow() { var i = currentIndex(); return i < 0 ? null : rows()[i]; }
  function restoreFocus() {
    if (focusedId === null) { return; }
    var all = rows();
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute("data-id") === focusedId) { all[i].classList.add("is-focused"); return; }
    }
  }
  function openRow(row) { if (row && row.getAttribute("data-href")) { window.location.href = row.getAttribute("data-href"); } }

  /* ---------- keyboard ---------- */
  var pendingG = false;
  document.addEventListener("keydown", function (e) {
    if (e.metaKey || e.ctrlKey || e.altKey) { return; }
    if (typing(e.target)) {
      if (e.key === "Escape") { e.target.blur(); }
      return;
    }
    var sheet = document.getElementById("cheatsheet");
    if (e.key === "?") { e.preventDefault(); if (sheet.open) { sheet.close(); } else { sheet.showModal(); } return; }
    if (pendingG) {
      pendingG = false;
      if (e.key === "q") { window.location.href = "/"; return; }
      if (e.key === "a") { window.location.href = "/approvals/"; return; }
    }
    if (e.key === "g") { pendingG = true; return; }
    var i = currentIndex();
    switch (e.key) {
      case "j": e.preventDefault(); focusRow(i + 1); break;
      case "k": e.preventDefault(); focusRow(i < 0 ? 0 : i - 1); break;
      case "o": case "Enter": if (i >= 0) { e.preventDefault(); openRow(currentRow()); } break;
      case "x": toggleSelect(currentRow()); break;
      case "/": var s = document.getElementById("search"); if (s) { e.preventDefault(); s.focus(); } break;
      case "a": decide("approve", e); break;
      case "r": decide("reject", e); break;
      default: break;
    }
  });

  function decide(kind, e) {
    if (body.getAttribute("data-page") !== "inbox") { return; }
    var row = currentRow();
    e.preventDefault();
    // Nothing is selected until the operator picks a card (j/k or a click): a keypress on
    // a fresh page only selects the first card, it never decides it.
    if (!row) { focusRow(0); return; }
    if (kind === "approve") {
      var form = row.querySelector("form[data-approve]");
      var confirm = form && form.querySelector("[data-confirm]");
      // A high-risk call: the amount or the word is typed first (the server checks it too).
      if (confirm && !confirm.value) { confirm.focus(); return; }
      if (form) { form.requestSubmit(); }
      return;
    }
    var input = row.querySelector("form[data-reject] input[name=reason]");
    if (input) { input.focus(); }
  }

  /* ---------- rows: click to open, selection for bulk ---------- */
  document.addEventListener("click", function (e) {
    var closer = e.target.closest("[data-close-dialog]");
    if (closer && closer.closest("dialog")) { e.preventDefault(); closer.closest("dialog").close(); return; }
    var action = e.target.closest("[data-action=cheatsheet]");
    if (action) { document.getElementById("cheatsheet").showModal(); return; }
    var row = e.target.closest("[data-row]");
    if (!row || e.target.closest("a, button, input, select, textarea, label, summary, details, form")) { return; }
    openRow(row);
  });

  function selectionBoxes() { return Array.prototype.slice.call(document.querySelectorAll("#bulk-form input[name=run]")); }
  function toggleSelect(row) {
    var box = row && row.querySelector("input[name=run]");
    if (box) { box.checked = !box.checked; updateSelection(); }
  }
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
    return Array.prototype.some.call(el.querySelectorAll("form[data-reject] input"), function (i) { return i.value; });
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
      var first = target.querySelector("[data-autofocus]");
      if (first) { first.focus(); }
    }
    restoreFocus();
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
  var confirmDialog = document.getElementById("confirm");
  if (confirmDialog) {
    confirmDialog.addEventListener("close", function () { document.getElementById("confirm-body").innerHTML = ""; });
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
    ws.onopen = function () { attempt = 0; if (dot) { dot.classList.add("on"); dot.title = "Live updates: connected"; } };
    ws.onclose = function () {
      if (dot) { dot.classList.remove("on"); dot.title = "Live updates: polling"; }
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
    var focus = body.getAttribute("data-focus");
    if (focus) {
      var all = rows();
      for (var i = 0; i < all.length; i++) { if (all[i].getAttribute("data-id") === focus) { focusRow(i); break; } }
    }
    if (body.getAttribute("data-ws")) { connect(body.getAttribute("data-ws"), 0); }
  });
})();
