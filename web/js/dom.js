// Small DOM helpers: elements built with textContent only (no HTML
// strings, so nothing a ticket says can become markup).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export const $ = (id) => document.getElementById(id);

export function ms(value) {
  if (value === null || value === undefined) return '–';
  return value >= 10000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;
}

export function num(value, digits = 0) {
  return value === null || value === undefined ? '–' : Number(value).toFixed(digits);
}

export function ago(msAgo) {
  if (msAgo === null || msAgo === undefined) return 'never';
  return msAgo < 1000 ? `${Math.round(msAgo)} ms ago` : `${(msAgo / 1000).toFixed(1)} s ago`;
}
