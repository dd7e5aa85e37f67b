// Column widths that fit, for the virtualised tables (every row is its own grid, so the
// browser cannot size a column by its content: this does, with a canvas' measureText).
//
// A column is at least as wide as its header (with the sort arrow once sorted) and its widest
// cell seen so far, up to its cap (`max`, in em: 24 unless said; a longer cell is cut,
// with its text in the title). A column with `grow` takes that share of the space left.
// Widths only grow, so a live table does not jitter; `template()` is the grid's columns.
const SAMPLE = 200;              // rows measured per setRows (evenly spread); the drawn ones too
const SLACK = 3;                 // px: sub-pixel rounding, the text's own overhang
const ARROW = " ▼";              // what a sorted header adds

let canvas = null;

function context() {
  if (!canvas) canvas = document.createElement("canvas");
  return canvas.getContext("2d");
}

const fontOf = (style) => `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;

export class ColumnFit {
  constructor(columns) {
    this.columns = columns;
    this.widths = columns.map(() => 0);
    this.ready = false;
  }

  // Read the fonts and paddings from a header cell and a body cell in the document;
  // false while the table is not shown (nothing is measured then).
  attach(headCell, bodyCell) {
    if (this.ready) return true;
    if (!headCell.isConnected || !bodyCell.isConnected) return false;
    const head = getComputedStyle(headCell);
    const body = getComputedStyle(bodyCell);
    if (!head.fontSize || !body.fontSize) return false;
    this.headFont = fontOf(head);
    this.cellFont = fontOf(body);
    this.em = parseFloat(body.fontSize);
    this.pad = parseFloat(body.paddingLeft) + parseFloat(body.paddingRight) + SLACK;
    this.headPad = parseFloat(head.paddingLeft) + parseFloat(head.paddingRight) + SLACK;
    this.ready = true;
    const ctx = context();
    ctx.font = this.headFont;
    this.columns.forEach((c, i) => {
      this.widths[i] = Math.ceil(ctx.measureText(c.label).width + this.headPad);
    });
    return true;
  }

  // A column sorted by: its header has an arrow too. True when it grew.
  sorted(key) {
    const i = this.columns.findIndex((c) => c.key === key);
    if (!this.ready || i < 0) return false;
    const ctx = context();
    ctx.font = this.headFont;
    const w = Math.ceil(ctx.measureText(this.columns[i].label + ARROW).width + this.headPad);
    if (w <= this.widths[i]) return false;
    this.widths[i] = w;
    return true;
  }

  // Measure rows (a sample of a long list); true when a column grew.
  measure(rows) {
    if (!this.ready || rows.length === 0) return false;
    const ctx = context();
    ctx.font = this.cellFont;
    const step = rows.length > SAMPLE ? rows.length / SAMPLE : 1;
    let grew = false;
    this.columns.forEach((c, i) => {
      const cap = (c.max ?? 24) * this.em;
      let widest = 0;
      for (let k = 0; k < rows.length && widest < cap; k += step) {
        const text = String(c.text(rows[Math.floor(k)]) ?? "");
        if (text) widest = Math.max(widest, ctx.measureText(text).width);
      }
      const w = Math.ceil(Math.min(widest, cap) + this.pad);
      if (w > this.widths[i]) {
        this.widths[i] = w;
        grew = true;
      }
    });
    return grew;
  }

  // The narrowest the table can be and show every header and fitted cell.
  total() {
    return this.widths.reduce((a, b) => a + b, 0);
  }

  template() {
    return this.columns.map((c, i) => {
      const min = this.widths[i] || Math.ceil((c.label.length + 3) * 0.6 * (this.em || 13));
      return c.grow ? `minmax(${min}px, ${c.grow}fr)` : `${min}px`;
    }).join(" ");
  }
}
