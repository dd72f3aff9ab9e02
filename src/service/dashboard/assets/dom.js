/* global document, Node */
// DOM helpers. Every string given here becomes a text node or an attribute
// value set through the DOM: nothing is parsed as HTML, so untrusted text
// (titles, branch names, comments, reasons) stays text.

/** An element with attributes (strings, set with setAttribute; `class` too) and children (nodes or strings as text). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    node.setAttribute(name, value === true ? '' : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/**
 * Untrusted text in an isolate of its own (`<bdi>`): a bidi control in it (a
 * right-to-left override in a branch name, say) cannot reorder what is shown
 * after it.
 */
export function text(value, className) {
  return el('bdi', className ? { class: className } : {}, value);
}

/** Replace a node's children. */
export function fill(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

export const short = (sha) => (typeof sha === 'string' ? sha.slice(0, 12) : '');

/** An ISO time as `YYYY-MM-DD HH:MM:SS` UTC. */
export function when(iso) {
  if (typeof iso !== 'string') return '';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toISOString().slice(0, 19).replace('T', ' ');
}

/** A duration in seconds as words (`42 s`, `3.5 min`, `2.1 h`). */
export function duration(seconds) {
  if (!Number.isFinite(seconds)) return '';
  if (seconds < 90) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  if (seconds < 5400) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}
