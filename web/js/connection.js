// The page's one WebSocket to this node (/v1/revis/stream): the cluster
// feed and the playground's tickets. It reconnects by itself (0.5 s,
// doubling to 5 s) and, when the node has a token, sends it as the
// subprotocol "revis.token.HEX" (browsers cannot set Authorization on a
// WebSocket; docs/protocol.md). The token is asked for once and kept in
// sessionStorage, so it lives as long as the tab.

const TOKEN_KEY = 'revis.token';

function storedToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function storeToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function hex(text) {
  return Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, '0')).join('');
}

// Whether the node takes `token` (empty: none): a plain GET of the status
// with it as the bearer token. Resolves 'ok', 'token' (401) or 'down'.
export async function probe(token) {
  try {
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    const r = await fetch('/v1/revis/status', { headers, cache: 'no-store' });
    if (r.status === 401) return 'token';
    return r.ok ? 'ok' : 'down';
  } catch {
    return 'down';
  }
}

export class Connection {
  // onMessage(event object), onState('open' | 'closed' | 'token').
  constructor({ onMessage, onState }) {
    this.onMessage = onMessage;
    this.onState = onState;
    this.ws = null;
    this.backoff = 500;
    this.stopped = false;
  }

  async start() {
    const verdict = await probe(storedToken());
    if (verdict === 'token') return this.onState('token');
    if (verdict === 'down') return this.retry();
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/revis/stream`;
    const token = storedToken();
    const ws = new WebSocket(url, token ? ['revis', `revis.token.${hex(token)}`] : ['revis']);
    this.ws = ws;
    ws.onopen = () => {
      this.backoff = 500;
      this.onState('open');
      this.send({ type: 'subscribe', feed: 'cluster' });
    };
    ws.onmessage = (e) => {
      // A seed is a 64-bit integer, more than a JavaScript number holds
      // exactly: it is read as text. (Inside a JSON string a quote is
      // escaped, so the pattern only meets the field itself.)
      let event;
      try { event = JSON.parse(e.data.replace(/"seed":(\d{16,})/g, '"seed":"$1"')); } catch { return; }
      this.onMessage(event);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.retry();
    };
  }

  retry() {
    if (this.stopped) return;
    this.onState('closed');
    setTimeout(() => this.start(), this.backoff);
    this.backoff = Math.min(this.backoff * 2, 5000);
  }

  send(message) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(message));
    return true;
  }
}
