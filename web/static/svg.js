// The SVG element helpers tengen's boards (board.js) and plots (plot.js) share.

export const SVG = "http://www.w3.org/2000/svg";

// A new element `name` with `attrs`, appended to `parent` when given.
export function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (parent) parent.appendChild(node);
  return node;
}

// A text element holding `content`.
export function text(content, attrs, parent) {
  const node = el("text", attrs, parent);
  node.textContent = content;
  return node;
}
