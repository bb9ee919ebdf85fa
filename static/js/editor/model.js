/* The editor's model of the suite (meta, regions, conditions, one row per item and
 * condition, predictions) and its conversions from and to the canonical suite the
 * server reads. The grid and the panels only display it. */

import { META_KNOWN, META_TEXT, setState, state } from "./context.js";
import { parseTags } from "./dom.js";

export { setState, state };

/** The sentence the scoring engine builds from a row: every region stripped, empty
 * regions dropped, the rest joined with single spaces. */
export function regionParts(row) {
  return state.regions
    .map((region, k) => ({ k, text: String(row.cells[region.key] ?? "").trim() }))
    .filter((part) => part.text !== "");
}

let keySeq = 0;
let rowSeq = 0;
export const newKey = () => `r${++keySeq}`;
export const newRowId = () => ++rowSeq;
export const fieldOf = (key) => `f_${key}`;
export const keyOf = (field) => field.slice(2);

export function fromCanonical(suite) {
  const given = suite.meta || {};
  const meta = {
    name: String(given.name ?? ""),
    metric: given.metric ?? "sum",
    tagsText: Array.isArray(given.tags) ? given.tags.join(", ") : "",
  };
  for (const key of META_TEXT) meta[key] = String(given[key] ?? "");
  const extraMeta = {};
  for (const [key, value] of Object.entries(given)) {
    if (!META_KNOWN.includes(key)) extraMeta[key] = value;
  }
  const regionMeta = suite.region_meta || {};
  const numbers = Object.keys(regionMeta)
    .map(Number)
    .sort((a, b) => a - b);
  const regions = numbers.map((n) => ({ key: newKey(), name: String(regionMeta[String(n)] ?? "") }));
  const keyByNumber = new Map(numbers.map((n, i) => [n, regions[i].key]));
  const conditions = [];
  const rows = [];
  for (const item of suite.items || []) {
    for (const condition of item.conditions || []) {
      const name = String(condition.condition_name ?? "");
      if (!conditions.includes(name)) conditions.push(name);
      const cells = {};
      for (const region of condition.regions || []) {
        const key = keyByNumber.get(region.region_number);
        if (key) cells[key] = String(region.content ?? "");
      }
      rows.push({ id: newRowId(), item: String(item.item_number), cond: name, cells });
    }
  }
  const predictions = (suite.predictions || []).map((p) =>
    typeof p === "string" ? p : String(p.formula ?? ""),
  );
  return { meta, extraMeta, regions, conditions, rows, predictions };
}

function itemNumberValue(text) {
  const trimmed = String(text ?? "").trim();
  // Anything else is sent as typed, so that the importer says what is wrong with it.
  return /^[+-]?\d+$/.test(trimmed) ? Number(trimmed) : trimmed;
}

/** Items are runs of consecutive rows with the same item number, as drawn in the grid.
 * A condition met again starts a new item too, so that two neighbouring items given the
 * same number stay two items, and the checks report the number used twice. */
export function itemGroups(rows = state.rows) {
  const groups = [];
  let current = null;
  for (const row of rows) {
    if (!current || row.item !== current.item || current.conds.has(row.cond)) {
      current = { item: row.item, rows: [], conds: new Set() };
      groups.push(current);
    }
    current.rows.push(row);
    current.conds.add(row.cond);
  }
  return groups;
}

export function groupOfRow(rowId) {
  return itemGroups().find((group) => group.rows.some((row) => row.id === rowId)) || null;
}

export function maxItemNumber() {
  let max = 0;
  for (const row of state.rows) {
    const value = itemNumberValue(row.item);
    if (typeof value === "number" && value > max) max = value;
  }
  return max;
}

/** The suite as the server reads it, plus where each item/condition came from in the
 * grid, to point the server's errors back at cells. */
export function toCanonical() {
  const meta = { name: state.meta.name, metric: state.meta.metric };
  for (const key of META_TEXT) {
    if (state.meta[key]) meta[key] = state.meta[key];
  }
  const tags = parseTags(state.meta.tagsText);
  if (tags.length) meta.tags = tags;
  Object.assign(meta, state.extraMeta);
  const regionMeta = {};
  state.regions.forEach((region, i) => {
    regionMeta[String(i + 1)] = region.name;
  });
  const predictions = [];
  const predMap = [];
  state.predictions.forEach((formula, i) => {
    // A blank line in the list is an unfinished edit, not a prediction.
    if (formula.trim()) {
      predictions.push({ type: "formula", formula });
      predMap.push(i);
    }
  });
  const rowMap = [];
  const items = itemGroups().map((group) => {
    rowMap.push(group.rows.map((row) => row.id));
    return {
      item_number: itemNumberValue(group.item),
      conditions: group.rows.map((row) => ({
        condition_name: row.cond,
        regions: state.regions.map((region, k) => ({
          region_number: k + 1,
          content: row.cells[region.key] ?? "",
        })),
      })),
    };
  });
  return { suite: { meta, region_meta: regionMeta, predictions, items }, rowMap, predMap };
}

export function ensureConditions(names) {
  let added = false;
  for (const name of names) {
    // A row without a condition is an error for the checks, not a new condition.
    if (name !== "" && !state.conditions.includes(name)) {
      state.conditions.push(name);
      added = true;
    }
  }
  return added;
}

/** Rewrite region numbers inside references, e.g. after a region moved. `map` gives
 * the new number, or null for a deleted region (written "?", which the checks flag). */
export function renumberFormulas(map) {
  let touched = 0;
  state.predictions = state.predictions.map((formula) => {
    const next = formula.replace(/\(\s*(\d+)(\s*;)/g, (whole, number, rest) => {
      if (!map.has(Number(number))) return whole;
      const target = map.get(Number(number));
      touched += 1;
      return `(${target === null ? "?" : target}${rest}`;
    });
    return next;
  });
  return touched;
}

export function renameConditionInFormulas(oldName, newName) {
  state.predictions = state.predictions.map((formula) =>
    formula.replace(/(;\s*%)([^%]*)(%)/g, (whole, open, name, close) =>
      name === oldName ? `${open}${newName}${close}` : whole,
    ),
  );
}
