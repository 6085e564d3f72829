// A sortable table over many rows: sorting is done on the data, and only one page of rows
// is in the DOM at a time, so 20,000 candidates sort and render in milliseconds.

const PAGE = 100;

export class SortableTable {
  // columns: [{key, label, value: row => sortable value, html: row => cell HTML, text?: bool,
  //            className?: more classes of its cells}]
  constructor(box, columns, { rowClass = () => "", rowId = () => "" } = {}) {
    this.box = box;
    this.columns = columns;
    this.rowClass = rowClass;
    this.rowId = rowId;
    this.rows = [];
    this.view = [];
    this.sort = { key: null, desc: false };
    this.filter = () => true;
    this.shown = PAGE;
    box.innerHTML = `<div class="table-wrap"><table class="candidates"><thead><tr>${columns
      .map((c) => `<th class="sortable ${c.text ? "text" : ""}" data-key="${c.key}">${c.label}</th>`)
      .join("")}</tr></thead><tbody></tbody></table></div>
      <div class="toolbar"><span class="table-count"></span><button class="more" hidden>show more</button></div>`;
    this.body = box.querySelector("tbody");
    box.querySelector("thead").addEventListener("click", (event) => {
      const th = event.target.closest("th");
      if (th) this.sortBy(th.dataset.key);
    });
    box.querySelector("button.more").addEventListener("click", () => {
      this.shown += PAGE * 5;
      this.render();
    });
  }

  setRows(rows) {
    this.rows = rows;
    this.refresh();
  }

  setFilter(filter) {
    this.filter = filter;
    this.shown = PAGE;
    this.refresh();
  }

  sortBy(key) {
    this.sort = { key, desc: this.sort.key === key ? !this.sort.desc : false };
    this.refresh();
  }

  refresh() {
    this.view = this.rows.filter(this.filter);
    const column = this.columns.find((c) => c.key === this.sort.key);
    if (column) {
      const sign = this.sort.desc ? -1 : 1;
      const value = column.value;
      // Missing values sort last in either direction.
      this.view.sort((a, b) => {
        const x = value(a), y = value(b);
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return x < y ? -sign : sign;
      });
    }
    this.render();
  }

  render() {
    const page = this.view.slice(0, this.shown);
    this.body.innerHTML = page
      .map((row) => `<tr class="${this.rowClass(row)}" data-arch="${this.rowId(row)}">${this.columns
        .map((c) => `<td class="${c.text ? "text" : ""} ${c.className || ""}">${c.html(row)}</td>`)
        .join("")}</tr>`)
      .join("");
    for (const th of this.box.querySelectorAll("th")) {
      th.classList.toggle("sorted-asc", th.dataset.key === this.sort.key && !this.sort.desc);
      th.classList.toggle("sorted-desc", th.dataset.key === this.sort.key && this.sort.desc);
    }
    this.box.querySelector(".table-count").textContent =
      `${page.length} shown of ${this.view.length} (${this.rows.length} results)`;
    this.box.querySelector("button.more").hidden = page.length >= this.view.length;
  }
}
