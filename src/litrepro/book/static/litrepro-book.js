// litrepro book: every table.litrepro-table gets a filter box and sortable columns.
// A cell sorts by its data-sort attribute: as a number when every non-empty key parses as one.
(function () {
  "use strict";
  function keyOf(row, col) {
    var cell = row.children[col];
    return cell ? (cell.getAttribute("data-sort") || cell.textContent || "") : "";
  }
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var keys = rows.map(function (r) { return keyOf(r, col); });
    var numeric = keys.every(function (k) { return k === "" || isFinite(Number(k)); });
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    Array.prototype.forEach.call(th.parentNode.children, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    rows.sort(function (a, b) {
      var x = keyOf(a, col), y = keyOf(b, col);
      if (numeric) { x = x === "" ? -Infinity : Number(x); y = y === "" ? -Infinity : Number(y); }
      return (x < y ? -1 : x > y ? 1 : 0) * dir;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function setUp(table) {
    var heads = table.tHead ? table.tHead.rows[0].children : [];
    Array.prototype.forEach.call(heads, function (th, col) {
      th.setAttribute("title", "sort by this column");
      th.classList.add("litrepro-sortable");
      th.addEventListener("click", function () { sortBy(table, col, th); });
    });
    var box = document.createElement("input");
    box.type = "search";
    box.className = "litrepro-filter";
    box.placeholder = "filter rows (" + table.tBodies[0].rows.length + ")";
    box.setAttribute("aria-label", "filter the table's rows");
    box.addEventListener("input", function () {
      var q = box.value.toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        r.style.display = r.textContent.toLowerCase().indexOf(q) >= 0 ? "" : "none";
      });
    });
    table.parentNode.insertBefore(box, table);
  }
  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.litrepro-table"), setUp);
  });
})();
