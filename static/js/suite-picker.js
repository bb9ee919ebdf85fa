// A searchable picker over a <select multiple data-suite-picker>: type to filter the
// suites by name or tag, tick as many as needed, see the chosen ones as chips. The select
// stays in the form (hidden) and holds the choice, so the form posts the same fields as
// without JavaScript, where the plain multi-select is what people use.

const MAX_SHOWN = 300;

function words(text) {
  return text.toLowerCase().split(/\s+/).filter(Boolean);
}

function element(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  Object.assign(el, props);
  el.append(...children);
  return el;
}

function entries(select) {
  return Array.from(select.options).map((option) => {
    const tags = (option.dataset.tags || "").split(" ").filter(Boolean);
    return { option, name: option.value, tags, haystack: (option.value + " " + tags.join(" ")).toLowerCase() };
  });
}

function matches(entry, query) {
  return query.every((word) => entry.haystack.includes(word));
}

function row(entry, onToggle) {
  const box = element("input", { type: "checkbox", checked: entry.option.selected });
  box.dataset.suite = entry.name;
  box.addEventListener("change", () => onToggle(entry, box.checked));
  const tags = entry.tags.map((t) => element("span", { className: "tag", textContent: t }));
  return element("label", { className: "picker-row" }, box, element("span", { className: "picker-name", textContent: entry.name }), ...tags);
}

function chip(entry, onToggle) {
  const remove = element("button", { type: "button", className: "chip-remove", textContent: "×" });
  remove.setAttribute("aria-label", "Remove " + entry.name);
  remove.addEventListener("click", () => onToggle(entry, false));
  const item = element("li", { className: "chip" }, element("span", { className: "chip-name", textContent: entry.name, title: entry.name }), remove);
  item.dataset.suite = entry.name;
  return item;
}

function enhance(select) {
  const all = entries(select);
  const search = element("input", { type: "search", className: "picker-search", placeholder: "Filter by name or tag…" });
  search.setAttribute("aria-label", "Filter suites by name or tag");
  const chips = element("ul", { className: "chips" });
  chips.setAttribute("aria-label", "Chosen suites");
  const list = element("div", { className: "picker-list" });
  list.setAttribute("role", "group");
  list.setAttribute("aria-label", "Suites");
  const count = element("span", { className: "picker-count muted small" });
  count.setAttribute("aria-live", "polite");
  const addShown = element("button", { type: "button", className: "button", textContent: "Select all shown" });
  const clear = element("button", { type: "button", className: "link", textContent: "Clear" });
  let shown = all;

  function toggle(entry, on) {
    entry.option.selected = on;
    render();
  }

  function render() {
    const query = words(search.value);
    shown = all.filter((e) => matches(e, query));
    list.replaceChildren(...shown.slice(0, MAX_SHOWN).map((e) => row(e, toggle)));
    if (!shown.length) list.append(element("p", { className: "muted small", textContent: "No suite matches." }));
    const chosen = all.filter((e) => e.option.selected);
    chips.replaceChildren(...chosen.map((e) => chip(e, toggle)));
    const more = shown.length > MAX_SHOWN ? ` (first ${MAX_SHOWN} listed; type more to narrow)` : "";
    count.textContent = `${shown.length} of ${all.length} shown${more} · ${chosen.length} chosen`;
  }

  addShown.addEventListener("click", () => { shown.forEach((e) => { e.option.selected = true; }); render(); });
  clear.addEventListener("click", () => { all.forEach((e) => { e.option.selected = false; }); render(); });
  search.addEventListener("input", render);
  // Enter in the filter would submit the form; it picks the only match instead.
  search.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    event.preventDefault();
    if (shown.length === 1) toggle(shown[0], true);
  });

  const tools = element("div", { className: "picker-tools" }, search, addShown, clear);
  const picker = element("div", { className: "suite-picker" }, chips, tools, count, list);
  select.hidden = true;
  select.after(picker);
  // The select's label now names the filter box.
  const label = select.id && document.querySelector(`label[for="${select.id}"]`);
  if (label) { search.id = select.id + "-filter"; label.htmlFor = search.id; }
  render();
}

document.querySelectorAll("select[data-suite-picker]").forEach(enhance);
