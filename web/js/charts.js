// Two small charts on a canvas, drawn here rather than with a library:
// throughput (generated tokens per second over all nodes, 5 s buckets) and
// time to first token (one point per ticket), over the last 5 minutes.

const WINDOW_MS = 5 * 60 * 1000;
const BUCKET_MS = 5000;

function colors() {
  const style = getComputedStyle(document.documentElement);
  const v = (name) => style.getPropertyValue(name).trim();
  return { fg: v('--muted'), line: v('--line'), accent: v('--accent'), ok: v('--ok') };
}

function niceMax(value) {
  if (value <= 0) return 1;
  const step = 10 ** Math.floor(Math.log10(value));
  for (const m of [1, 2, 5, 10]) if (value <= m * step) return m * step;
  return 10 * step;
}

// Axes with the y range 0..max, and `draw(x(t), y(v))` for the data.
function frame(canvas, max, unit, draw) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth, height = canvas.clientHeight;
  if (canvas.width !== width * ratio || canvas.height !== height * ratio) {
    canvas.width = width * ratio;
    canvas.height = height * ratio;
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  const c = colors();
  const left = 44, bottom = 18, top = 8, right = 8;
  const now = Date.now();
  const x = (t) => left + ((t - (now - WINDOW_MS)) / WINDOW_MS) * (width - left - right);
  const y = (v) => height - bottom - (v / max) * (height - top - bottom);
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillStyle = c.fg;
  ctx.strokeStyle = c.line;
  ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    ctx.beginPath();
    ctx.moveTo(left, y(v));
    ctx.lineTo(width - right, y(v));
    ctx.stroke();
    ctx.fillText(`${Math.round(v)}${i === 4 ? ' ' + unit : ''}`, 2, y(v) + 4);
  }
  for (let m = 5; m >= 0; m--) {
    ctx.textAlign = m === 0 ? 'right' : 'center';
    ctx.fillText(m === 0 ? 'now' : `-${m}m`, x(now - m * 60000), height - 4);
  }
  ctx.textAlign = 'left';
  draw(ctx, x, y, c);
}

export class Charts {
  constructor(throughputCanvas, ttftCanvas) {
    this.throughputCanvas = throughputCanvas;
    this.ttftCanvas = ttftCanvas;
    this.points = [];  // {t, tokens, ttftMs} per finished ticket
    this.seen = new Set();
  }

  // A ticket that finished (once per ticketID).
  add(ticket) {
    if (this.seen.has(ticket.ticketID) || ticket.state !== 'done') return;
    this.seen.add(ticket.ticketID);
    this.points.push({ t: Date.now(), tokens: ticket.tokens || 0, ttftMs: ticket.ttftMs });
  }

  draw() {
    const now = Date.now();
    this.points = this.points.filter((p) => p.t > now - WINDOW_MS);
    const buckets = new Map();
    for (const p of this.points) {
      const b = Math.floor(p.t / BUCKET_MS) * BUCKET_MS;
      buckets.set(b, (buckets.get(b) || 0) + p.tokens);
    }
    const rates = [];
    for (let b = Math.floor((now - WINDOW_MS) / BUCKET_MS) * BUCKET_MS; b <= now; b += BUCKET_MS)
      rates.push({ t: b + BUCKET_MS / 2, v: ((buckets.get(b) || 0) * 1000) / BUCKET_MS });
    frame(this.throughputCanvas, niceMax(Math.max(...rates.map((r) => r.v))), 'tok/s', (ctx, x, y, c) => {
      ctx.strokeStyle = c.accent;
      ctx.lineWidth = 2;
      ctx.beginPath();
      rates.forEach((r, i) => (i ? ctx.lineTo(x(r.t), y(r.v)) : ctx.moveTo(x(r.t), y(r.v))));
      ctx.stroke();
    });
    const ttft = this.points.filter((p) => typeof p.ttftMs === 'number');
    frame(this.ttftCanvas, niceMax(Math.max(0, ...ttft.map((p) => p.ttftMs))), 'ms', (ctx, x, y, c) => {
      ctx.fillStyle = c.ok;
      for (const p of ttft) {
        ctx.beginPath();
        ctx.arc(x(p.t), y(p.ttftMs), 3, 0, 2 * Math.PI);
        ctx.fill();
      }
    });
  }
}
