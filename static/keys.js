/* AgentOps console: lists and the keyboard.
   Every list is marked up the same way (a [data-list] holding [data-row] rows, each with a
   data-href or a first link), so j/k/x/o work on all of them. KEYS below is the one table of
   shortcuts: the handler runs it and the "?" sheet lists the entries that apply to this page.
   Nothing here ever performs an action: keys move, select, open pages and open confirm dialogs. */
(function () {
  "use strict";
  var body = document.body;
  var focusedId = null;
  var pendingG = false;

  function $(selector) { return document.querySelector(selector); }
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("[data-list] [data-row]")); }
  function typing(el) {
    return el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
  }
  function modalOpen() {
    return Array.prototype.some.call(document.querySelectorAll("dialog[open]"), function (d) { return d.id !== "cheatsheet"; });
  }

  /* ---------- rows ---------- */
  function rowKey(row, index) { return row.getAttribute("data-id") || row.getAttribute("data-href") || "#" + index; }
  function currentIndex() {
    var all = rows();
    for (var i = 0; i < all.length; i++) { if (all[i].classList.contains("is-focused")) { return i; } }
    return -1;
  }
  function currentRow() { var i = currentIndex(); return i < 0 ? null : rows()[i]; }
  function focusRow(index) {
    var all = rows();
    if (!all.length) { return; }
    index = Math.max(0, Math.min(index, all.length - 1));
    all.forEach(function (r) { r.classList.remove("is-focused"); r.removeAttribute("aria-current"); });
    var row = all[index];
    row.classList.add("is-focused");
    row.setAttribute("aria-current", "true");
    // A real focus (not only a highlight), so a screen reader reads the row it landed on.
    if (!row.hasAttribute("tabindex")) { row.setAttribute("tabindex", "-1"); }
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "nearest" });
    focusedId = rowKey(row, index);
  }
  /* After htmx replaces a list (polling, live push) the same row stays selected. */
  function restoreFocus() {
    if (focusedId === null) { return; }
    var all = rows();
    for (var i = 0; i < all.length; i++) {
      if (rowKey(all[i], i) === focusedId) {
        all[i].classList.add("is-focused");
        all[i].setAttribute("aria-current", "true");
        if (document.activeElement === body) { all[i].setAttribute("tabindex", "-1"); all[i].focus({ preventScroll: true }); }
        return;
      }
    }
  }
  /* Open a row: its page (data-href), a row that is a <details> (or is marked data-unfold)
     unfolds, else its first link, else the details inside it (an event's data). */
  function openRow(row) {
    if (!row) { return; }
    var href = row.getAttribute("data-href");
    if (href) { window.location.href = href; return; }
    if (row.tagName === "DETAILS") { row.open = !row.open; return; }
    /* A row marked data-unfold opens its details first (a trace's model call: its links,
       the whole request, are inside). */
    var unfold = row.hasAttribute("data-unfold") && row.querySelector("details");
    if (unfold) { unfold.open = !unfold.open; return; }
    var link = row.querySelector("a[href]");
    if (link) { link.click(); return; }
    var details = row.querySelector("details");
    if (details) { details.open = !details.open; }
  }
  function selectBox(row) { return row && row.querySelector("input[type=checkbox][name=run]:not(:disabled)"); }
  function toggleSelect(row) {
    var box = selectBox(row);
    // A click, so console.js hears the change and updates the bulk bar.
    if (box) { box.click(); }
  }

  /* ---------- inbox: a / r on the selected card ---------- */
  function decideCard(kind) {
    var row = currentRow();
    // Nothing is selected until the operator picks a card (j/k or a click): a keypress on a
    // fresh page only selects the first card, it never decides it.
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
  function inboxDecides() { return body.getAttribute("data-page") === "inbox" && !!$("[data-list] form[data-approve], [data-list] form[data-reject]"); }

  /* ---------- run page: decide-and-next ---------- */
  function decideButton() { return $("#live .panel[data-stuck] .actions [data-decide]"); }
  /* Open the recommended action's confirm dialog with "then the next stuck run" ticked.
     The dialog still asks for a reason (and any typed confirmation): one key never acts. */
  function decide() {
    var btn = decideButton();
    if (!btn) { return; }
    var url = btn.getAttribute("href") + "?then=next";
    if (typeof htmx === "undefined") { window.location.href = url; return; }
    htmx.ajax("GET", url, { target: "#confirm-body", swap: "innerHTML" });
  }
  function go(url) { return function () { window.location.href = url; }; }
  function always() { return true; }
  function hasRows() { return rows().length > 0; }

  function toggleSheet() {
    var sheet = document.getElementById("cheatsheet");
    if (!sheet) { return; }
    if (sheet.open) { sheet.close(); return; }
    fillSheet(sheet);
    sheet.showModal();
  }

  /* The one table of shortcuts. `when` says whether a key does something on this page. */
  var KEYS = [
    { keys: ["j"], label: "next row", when: hasRows, run: function () { focusRow(currentIndex() + 1); } },
    { keys: ["k"], label: "previous row", when: hasRows, run: function () { var i = currentIndex(); focusRow(i < 0 ? 0 : i - 1); } },
    { keys: ["o", "Enter"], label: "open the selected row", when: hasRows, run: function () { openRow(currentRow()); } },
    { keys: ["x"], label: "select the row for a bulk action", when: function () { return rows().some(selectBox); }, run: function () { toggleSelect(currentRow()); } },
    { keys: ["a"], label: "approve the selected request (high-risk ones ask for the amount or the word first)", when: inboxDecides, run: function () { decideCard("approve"); } },
    { keys: ["r"], label: "reject the selected request (type a reason)", when: inboxDecides, run: function () { decideCard("reject"); } },
    { keys: ["d"], label: "decide: open the recommended action to confirm, then go to the next stuck run", when: function () { return !!decideButton(); }, run: decide },
    { keys: ["n"], label: "next stuck run", when: function () { return !!$("[data-next-stuck]"); }, run: function () { $("[data-next-stuck]").click(); } },
    { keys: ["/"], label: "search", when: function () { return !!$("#search"); }, run: function () { $("#search").focus(); } },
    { keys: ["g q"], label: "go to the queue", when: always, run: go("/") },
    { keys: ["g a"], label: "go to approvals", when: always, run: go("/approvals/") },
    { keys: ["?"], label: "this list of keys", when: always, run: toggleSheet },
    { keys: ["Esc"], label: "close a dialog or leave a field", when: always, run: null }
  ];

  function fillSheet(sheet) {
    var list = sheet.querySelector("#cheatsheet-keys");
    list.textContent = "";
    KEYS.filter(function (k) { return k.when(); }).forEach(function (k) {
      var dt = document.createElement("dt");
      dt.setAttribute("data-keys", k.keys.join(","));
      k.keys.forEach(function (combo, n) {
        if (n) { dt.appendChild(document.createTextNode(" or ")); }
        combo.split(" ").forEach(function (part, m) {
          if (m) { dt.appendChild(document.createTextNode(" then ")); }
          var kbd = document.createElement("kbd");
          kbd.textContent = part;
          dt.appendChild(kbd);
        });
      });
      var dd = document.createElement("dd");
      dd.textContent = k.label;
      list.appendChild(dt);
      list.appendChild(dd);
    });
  }

  function find(combo) {
    for (var i = 0; i < KEYS.length; i++) {
      if (KEYS[i].run && KEYS[i].keys.indexOf(combo) >= 0 && KEYS[i].when()) { return KEYS[i]; }
    }
    return null;
  }

  document.addEventListener("keydown", function (e) {
    if (e.metaKey || e.ctrlKey || e.altKey) { return; }
    if (typing(e.target)) {
      if (e.key === "Escape") { e.target.blur(); }
      return;
    }
    if (e.key === "?") { e.preventDefault(); toggleSheet(); return; }
    // Behind a confirm dialog the page does not move; the dialog has the keyboard.
    if (modalOpen() || (document.getElementById("cheatsheet") || {}).open) { return; }
    // Enter on a link or button is the browser's; on the page or a selected row it opens.
    if (e.key === "Enter" && e.target !== body && !e.target.hasAttribute("data-row")) { return; }
    var combo = pendingG ? "g " + e.key : e.key;
    pendingG = !pendingG && e.key === "g";
    if (pendingG) { return; }
    var binding = find(combo);
    if (binding) { e.preventDefault(); binding.run(); }
  });

  /* A click on a row opens it, unless it was on something inside the row that acts. */
  document.addEventListener("click", function (e) {
    if (e.target.closest("[data-action=cheatsheet]")) { toggleSheet(); return; }
    var row = e.target.closest("[data-list] [data-row][data-href]");
    if (!row || e.target.closest("a, button, input, select, textarea, label, summary, details, form")) { return; }
    openRow(row);
  });

  document.addEventListener("htmx:afterSwap", restoreFocus);
  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("[data-js-only]"), function (el) { el.hidden = false; });
    var focus = body.getAttribute("data-focus");
    if (!focus) { return; }
    var all = rows();
    for (var i = 0; i < all.length; i++) { if (all[i].getAttribute("data-id") === focus) { focusRow(i); break; } }
  });
})();
