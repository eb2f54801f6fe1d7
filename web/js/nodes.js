// The node cards, from the feed's cluster view (GET /v1/revis/cluster's
// shape, docs/fabric.md). A peer is known by its address: while its link
// is down the view no longer has its name, so the last one seen is kept.

import { h, ago, num } from './dom.js';

const names = new Map();  // address -> last name seen

function progressOf(job) {
  if (!job) return null;
  if (job.phase === 'generating' && job.maxTokens > 0)
    return { label: `${job.generated} / ${job.maxTokens} tokens`, value: job.generated / job.maxTokens };
  if (job.phase === 'prefill' && job.promptTokens > 0)
    return { label: `prompt ${job.promptDone} / ${job.promptTokens}`, value: job.promptDone / job.promptTokens };
  return { label: job.phase || 'starting', value: 0 };
}

function card(node) {
  const address = node.self ? `${location.host} (this node)` : node.address;
  if (node.name) names.set(node.address, node.name);
  const name = node.name || names.get(node.address) || node.address;
  const offline = !node.self && (node.link !== 'up' || !node.name);
  const job = offline ? null : node.job;
  const state = offline ? 'offline' : node.busy ? 'busy' : 'idle';
  const progress = progressOf(job);
  const liveTokS = job && job.phase === 'generating' && job.elapsedMs > 0 ? (job.generated * 1000) / job.elapsedMs : null;
  const loaded = new Set(node.loaded || []);
  const otherCatalog = !offline && node.catalogMatches === false;
  return h('article', { class: `card ${state}`, 'data-node': name, 'data-state': state, 'aria-label': `node ${name}, ${state}` },
    h('header', {},
      h('h3', {}, name),
      h('span', { class: `badge ${state}` }, state)),
    h('p', { class: 'muted addr' }, address, node.engine === 'sim' ? ' · simulated engine' : ''),
    otherCatalog ? h('p', { class: 'flag', role: 'note' }, 'another catalogue: gets no tickets from here') : null,
    h('dl', {},
      h('dt', {}, 'tiers'), h('dd', {}, (node.tiers || []).map((t) => h('span', { class: loaded.has(t) ? 'tier loaded' : 'tier', title: loaded.has(t) ? 'model loaded' : 'not loaded' }, t))),
      h('dt', {}, 'slots'), h('dd', { title: 'jobs in the batch / slots (one forward pass carries them together)' },
        offline ? '–' : `${node.running ?? 0} / ${node.slots ?? 1}`),
      h('dt', {}, 'device'), h('dd', { title: 'where the loaded models\' layers run' },
        node.device && node.device !== 'cpu' ? `${node.device} · ${node.gpuLayers ?? 0} layers` : 'CPU'),
      h('dt', {}, 'job'), h('dd', {}, job ? `${job.task || '?'} · ${job.phase}${node.running > 1 ? ` (+${node.running - 1})` : ''}` : '–'),
      h('dt', {}, 'tok/s'), h('dd', {}, liveTokS !== null ? `${num(liveTokS, 1)} now` : `${num(node.tokPerSec, 1)} last`),
      h('dt', {}, 'queue'), h('dd', {}, offline ? '–' : String(node.queueLength ?? 0)),
      h('dt', {}, 'heartbeat'), h('dd', {}, node.self ? 'this node' : ago(node.lastHeartbeatMsAgo)),
      h('dt', {}, 'catalogue'), h('dd', { title: node.catalog || '' }, node.catalog ? node.catalog.slice(0, 15) + '…' : '–')),
    progress ? h('div', { class: 'progress' },
      h('progress', { max: '1', value: String(progress.value), 'aria-label': 'progress' }),
      h('span', { class: 'muted' }, progress.label)) : null,
    offline && node.lastError ? h('p', { class: 'muted small' }, node.lastError) : null);
}

export function renderNodes(container, view) {
  container.replaceChildren(...view.nodes.map(card));
}
