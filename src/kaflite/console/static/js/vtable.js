// A virtualised table: only the rows in view exist in the DOM (a pool of row elements that
// is re-used as the table scrolls), and an update rewrites only the cells whose text changed.
// It keeps a page fast with 10,000 partitions or 1,000 connections. Its columns fit their
// headers and cells (colfit.js); a header click sorts, and says so (aria-sort, an arrow).
import { ColumnFit } from "./colfit.js";
import { el } from "./core.js";

export class VTable {
  // columns: [{key, label, text(row) -> string, cls(row) -> string, sort(row) -> value,
  //            grow (a share of the width left), max (em: the widest a cell is fitted)}]
  constructor(columns, { key, rowHeight = 24, height = "60vh", onClick, name } = {}) {
    this.columns = columns;
    this.keyOf = key;
    this.rowHeight = rowHeight;
    this.onClick = onClick;
    this.rows = [];
    this.view = [];
    this.filterText = "";
    this.sortKey = null;
    this.sortDir = 1;
    this.pool = [];
    this.frame = 0;
    this.fit = new ColumnFit(columns);
    this.measureView = false;
    this.root = el("div.vtable", { "data-table": name || "" });
    this.root.__vtable = this; // for benchmarks/console_render.py
    this.root.style.setProperty("--cols", this.fit.template());
    this.root.style.maxHeight = height;
    this.head = el("div.vt-head", { role: "row" });
    for (const c of columns) {
      const h = el("div.vt-cell", { "data-col": c.key, title: c.title || c.label, text: c.label,
        role: "columnheader", tabindex: 0, "aria-sort": "none" });
      h.addEventListener("click", () => this.sortBy(c.key));
      h.addEventListener("keydown", (ev) => {
        if (ev.key === "Enter" || ev.key === " ") {
          ev.preventDefault();
          this.sortBy(c.key);
        }
      });
      this.head.append(h);
    }
    this.body = el("div.vt-body");
    // A cell outside the rows, for the fonts the column fit measures with.
    this.probe = el("div.vt-cell", { "aria-hidden": "true", style: "position:absolute;visibility:hidden" });
    this.body.append(this.probe);
    this.count = el("div.vt-count");
    this.root.append(this.head, this.body);
    this.root.addEventListener("scroll", () => this.schedule(), { passive: true });
    this.body.addEventListener("click", (ev) => {
      const row = ev.target.closest(".vt-row");
      if (row && this.onClick && row._row) this.onClick(row._row, ev);
    });
  }

  setRows(rows) {
    this.rows = rows;
    this.refilter();
  }

  setFilter(text) {
    this.filterText = text.trim().toLowerCase();
    this.refilter();
  }

  sortBy(key) {
    this.sortDir = this.sortKey === key ? -this.sortDir : 1;
    this.sortKey = key;
    for (const h of this.head.children) {
      h.setAttribute("aria-sort", h.dataset.col !== key ? "none" : this.sortDir > 0 ? "ascending" : "descending");
    }
    if (this.fit.sorted(key)) this.applyFit();
    this.refilter();
  }

  refilter() {
    let view = this.rows;
    if (this.filterText) {
      const f = this.filterText;
      view = view.filter((r) => this.columns.some((c) => String(c.text(r)).toLowerCase().includes(f)));
    }
    if (this.sortKey) {
      const col = this.columns.find((c) => c.key === this.sortKey);
      const val = col.sort || col.text;
      const dir = this.sortDir;
      view = view.slice().sort((a, b) => {
        const x = val(a);
        const y = val(b);
        if (typeof x === "number" && typeof y === "number") return (x - y) * dir;
        return String(x).localeCompare(String(y), "en", { numeric: true }) * dir;
      });
    }
    this.view = view;
    this.measureView = true;
    this.count.textContent = view.length === this.rows.length ? `${view.length} rows` : `${view.length} of ${this.rows.length} rows`;
    this.body.style.height = `${Math.max(1, view.length) * this.rowHeight}px`;
    this.schedule();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  // Fit the columns to their headers, the rows in view and (after a change of rows) a
  // sample of them all; the grid changes only when a column grew.
  fitColumns(first, n) {
    const fresh = !this.fit.ready;
    if (!this.fit.attach(this.head.firstChild, this.probe)) return;
    let grew = this.fit.measure(this.view.slice(first, first + n)) || fresh;
    if (this.measureView) {
      this.measureView = false;
      grew = this.fit.measure(this.view) || grew;
    }
    if (grew) this.applyFit();
  }

  applyFit() {
    this.root.style.setProperty("--cols", this.fit.template());
    // as wide as the columns' least (no wider: max-content would size every fr track by
      // the widest column's share), the head and the rows alike
    this.head.style.minWidth = this.body.style.minWidth = `${this.fit.total()}px`;
  }

  // Render now (tests and the benchmark call it through renderNow to time one full pass).
  render() {
    const top = Math.max(0, this.root.scrollTop - this.head.offsetHeight);
    const visible = Math.ceil((this.root.clientHeight || 600) / this.rowHeight) + 2;
    const first = Math.min(Math.floor(top / this.rowHeight), Math.max(0, this.view.length - 1));
    const n = Math.max(0, Math.min(visible, this.view.length - first));
    this.fitColumns(first, n);
    while (this.pool.length < n) {
      const row = el("div.vt-row");
      row._cells = this.columns.map((c) => {
        const cell = el("div.vt-cell", { "data-col": c.key });
        row.append(cell);
        return cell;
      });
      this.pool.push(row);
      this.body.append(row);
    }
    for (let i = 0; i < this.pool.length; i++) {
      const row = this.pool[i];
      if (i >= n) {
        if (row.style.display !== "none") row.style.display = "none";
        if (row.dataset.key !== undefined) delete row.dataset.key;
        row._row = null;
        continue;
      }
      const data = this.view[first + i];
      row._row = data;
      if (row.style.display === "none") row.style.display = "";
      const y = `translateY(${(first + i) * this.rowHeight}px)`;
      if (row.style.transform !== y) row.style.transform = y;
      const key = String(this.keyOf(data));
      if (row.dataset.key !== key) row.dataset.key = key;
      const rowCls = this.rowClass ? this.rowClass(data) : "";
      if (row._cls !== rowCls) {
        row.className = `vt-row ${rowCls}`;
        row._cls = rowCls;
      }
      this.columns.forEach((c, j) => {
        const cell = row._cells[j];
        const text = String(c.text(data) ?? "");
        if (cell.textContent !== text) {
          cell.textContent = text;
          cell.title = text;
        }
        const cls = c.cls ? c.cls(data) : "";
        if (cell._cls !== cls) {
          cell.className = `vt-cell ${cls}`;
          cell._cls = cls;
        }
      });
    }
  }
}

// A filter box bound to a table.
export function filterBox(table, placeholder = "filter…") {
  const input = el("input.filter", { type: "search", placeholder, "aria-label": placeholder });
  input.addEventListener("input", () => table.setFilter(input.value));
  return input;
}
