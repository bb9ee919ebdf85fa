/* Small DOM and network helpers of the grid editor: element building, the CSRF token,
 * JSON requests, downloads, and the tab-separated text that spreadsheets copy. */

import { root } from "./context.js";


export const $ = (id) => document.getElementById(id);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function csrfToken() {
  const input = root.querySelector("input[name=csrfmiddlewaretoken]");
  if (input && input.value) return input.value;
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

export function urlFor(template, name) {
  return template.replace("__name__", encodeURIComponent(name));
}

export async function send(url, body, { method = "POST", signal } = {}) {
  const response = await fetch(url, {
    method,
    credentials: "same-origin",
    headers: {
      "Content-Type": "application/json",
      Accept: "application/json",
      "X-CSRFToken": csrfToken(),
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
    signal,
  });
  let data = null;
  try {
    data = await response.json();
  } catch (_) {
    data = null;
  }
  return { status: response.status, ok: response.ok, data };
}

export function download(filename, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = el("a", { href: url, download: filename, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function safeFilename(name) {
  return (name || "suite").replace(/[^\w.-]+/g, "_");
}

export function parseTags(text) {
  return String(text || "")
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean);
}

/** Tab-separated rows as spreadsheets copy them: quoted cells may hold tabs, newlines
 * and doubled quotes; the trailing newline they add is not an extra row. */
export function parseTSV(text) {
  const rows = [];
  let row = [];
  let cell = "";
  let i = 0;
  let quotedCell = false;
  text = String(text).replace(/\r\n?/g, "\n");
  while (i < text.length) {
    const ch = text[i];
    if (ch === '"' && cell === "" && !quotedCell) {
      // A quoted cell: read to the closing quote.
      let j = i + 1;
      let value = "";
      let closed = false;
      while (j < text.length) {
        if (text[j] === '"') {
          if (text[j + 1] === '"') {
            value += '"';
            j += 2;
            continue;
          }
          closed = true;
          break;
        }
        value += text[j];
        j += 1;
      }
      if (closed && (j + 1 >= text.length || text[j + 1] === "\t" || text[j + 1] === "\n")) {
        cell = value;
        quotedCell = true;
        i = j + 1;
        continue;
      }
      // Not a well-formed quoted cell: take the quote literally.
    }
    if (ch === "\t") {
      row.push(cell);
      cell = "";
      quotedCell = false;
    } else if (ch === "\n") {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = "";
      quotedCell = false;
    } else {
      cell += ch;
    }
    i += 1;
  }
  if (cell !== "" || row.length || quotedCell) {
    row.push(cell);
    rows.push(row);
  }
  return rows;
}
