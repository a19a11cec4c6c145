// The KSI report's only script (its SHA-256 is the page's script-src). It sorts and filters
// tables, searches an attempt's steps and opens the task or attempt a link points at. It
// reads text with textContent and never writes markup: nothing from a run can become code.
(function () {
  "use strict";

  function cellValue(row, index, type) {
    var cell = row.cells[index];
    var raw = cell ? (cell.getAttribute("data-v") !== null ? cell.getAttribute("data-v") : cell.textContent) : "";
    if (type === "num") {
      var n = parseFloat(raw);
      return isNaN(n) ? -Infinity : n;
    }
    return raw.toLowerCase();
  }

  function sortBy(table, th) {
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var type = th.getAttribute("data-type") || "text";
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(th.parentNode.children, function (other) {
      other.removeAttribute("aria-sort");
    });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.forEach(function (row, i) { row.setAttribute("data-order", String(i)); });
    rows.sort(function (a, b) {
      var x = cellValue(a, index, type), y = cellValue(b, index, type);
      var result = x < y ? -1 : x > y ? 1 : 0;
      if (!ascending) { result = -result; }
      return result || (+a.getAttribute("data-order") - +b.getAttribute("data-order"));
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  function applyFilters(tableId) {
    var table = document.getElementById(tableId);
    if (!table) { return; }
    var state = document.querySelector('.state-filter[data-table="' + tableId + '"]');
    var text = document.querySelector('.text-filter[data-table="' + tableId + '"]');
    var wantState = state ? state.value : "";
    var wantText = text ? text.value.trim().toLowerCase() : "";
    var shown = 0, rows = table.tBodies[0].rows;
    for (var i = 0; i < rows.length; i++) {
      var row = rows[i];
      var ok = (!wantState || row.getAttribute("data-state") === wantState) &&
               (!wantText || (row.getAttribute("data-id") || "").indexOf(wantText) !== -1);
      row.hidden = !ok;
      if (ok) { shown++; }
    }
    var count = document.getElementById(tableId + "-count");
    if (count) { count.textContent = shown + " of " + rows.length + " tasks"; }
  }

  // An attempt's steps: keep those whose text holds the search (any case), and with
  // "failed only" those marked failed. The text is read once per list, on first use.
  var stepTexts = {};
  function filterSteps(listId) {
    var list = document.getElementById(listId);
    if (!list) { return; }
    var search = document.querySelector('.step-search[data-steps="' + listId + '"]');
    var failed = document.querySelector('.step-failed[data-steps="' + listId + '"]');
    var want = search ? search.value.trim().toLowerCase() : "";
    var onlyFailed = failed ? failed.checked : false;
    var items = list.children;
    if (!stepTexts[listId]) {
      stepTexts[listId] = Array.prototype.map.call(items, function (li) {
        return li.textContent.toLowerCase();
      });
    }
    var texts = stepTexts[listId], shown = 0;
    for (var i = 0; i < items.length; i++) {
      var ok = (!want || texts[i].indexOf(want) !== -1) &&
               (!onlyFailed || items[i].getAttribute("data-failed") === "1");
      items[i].hidden = !ok;
      if (ok) { shown++; }
    }
    var count = document.getElementById(listId + "-count");
    if (count) { count.textContent = shown + " of " + items.length + " steps"; }
  }

  function openTarget() {
    // Task anchors keep the %XX escapes of their directory names: try the hash as
    // typed first, then decoded.
    var raw = location.hash.slice(1);
    var el = raw ? document.getElementById(raw) : null;
    if (!el && raw) {
      try { el = document.getElementById(decodeURIComponent(raw)); } catch (e) { el = null; }
    }
    if (!el) { return; }
    for (var node = el; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") { node.open = true; }
    }
    el.scrollIntoView({ block: "start" });
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
        th.setAttribute("tabindex", "0");
        th.addEventListener("click", function () { sortBy(table, th); });
        th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sortBy(table, th); } });
      });
    });
    Array.prototype.forEach.call(document.querySelectorAll(".state-filter, .text-filter"), function (input) {
      var tableId = input.getAttribute("data-table");
      input.addEventListener("input", function () { applyFilters(tableId); });
      input.addEventListener("change", function () { applyFilters(tableId); });
    });
    Array.prototype.forEach.call(document.querySelectorAll(".step-search, .step-failed"), function (input) {
      var listId = input.getAttribute("data-steps");
      input.addEventListener("input", function () { filterSteps(listId); });
      input.addEventListener("change", function () { filterSteps(listId); });
    });
    window.addEventListener("hashchange", openTarget);
    openTarget();
  });
})();
