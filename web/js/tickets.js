// The live ticket table (the feed's ticketUpdate events) and a ticket's
// detail: its result and provenance, fetched by `resume` (the node keeps
// results result_ttl_s), and the timeline of the updates this page saw.

import { h, $, ms, num } from './dom.js';

const MAX_ROWS = 200;

export class Tickets {
  constructor(connection) {
    this.connection = connection;
    this.byId = new Map();  // ticketID -> {ticket, timeline: [{t, state, node}]}
    this.detailId = null;
    this.dirty = false;
  }

  update(ticket) {
    let entry = this.byId.get(ticket.ticketID);
    if (!entry) {
      entry = { ticket, timeline: [] };
      this.byId.set(ticket.ticketID, entry);
      if (this.byId.size > MAX_ROWS) this.byId.delete(this.byId.keys().next().value);
    }
    entry.ticket = ticket;
    const last = entry.timeline[entry.timeline.length - 1];
    if (!last || last.state !== ticket.state || last.node !== ticket.node || last.attempt !== ticket.attempt)
      entry.timeline.push({ t: new Date(), state: ticket.state, node: ticket.node, attempt: ticket.attempt });
    this.dirty = true;
    if (this.detailId === ticket.ticketID) this.renderTimeline(entry);
  }

  render() {
    if (!this.dirty) return;
    this.dirty = false;
    const rows = [...this.byId.values()].sort((a, b) => b.ticket.receivedUnixMs - a.ticket.receivedUnixMs).map(({ ticket: t }) =>
      h('tr', { 'data-ticket': t.ticketID, 'data-state': t.state },
        h('td', {}, h('button', { class: 'link', type: 'button', onclick: () => this.open(t.ticketID) }, t.ticketID)),
        h('td', {}, t.taskType),
        h('td', {}, h('span', { class: `badge ${t.state}` }, t.state), t.error ? ` ${t.error}` : '', t.attempt > 1 ? ` (attempt ${t.attempt})` : ''),
        h('td', {}, t.node || '–'),
        h('td', { class: 'n' }, ms(t.waitMs)),
        h('td', { class: 'n' }, ms(t.durationMs)),
        h('td', { class: 'n' }, num(t.tokens)),
        h('td', { class: 'n' }, num(t.tokPerSec, 1))));
    // The rows are new elements: a keyboard user's focus on a row's button
    // moves to that row's new button instead of being lost.
    const focused = document.activeElement?.closest?.('#tickets tr[data-ticket]')?.dataset.ticket;
    $('tickets').tBodies[0].replaceChildren(...rows);
    $('tickets-empty').hidden = rows.length > 0;
    if (focused !== undefined) rows.find((row) => row.dataset.ticket === focused)?.querySelector('button')?.focus();
  }

  open(id) {
    const entry = this.byId.get(id);
    if (!entry) return;
    this.detailId = id;
    $('detail-h').textContent = `Ticket ${id}`;
    $('detail-provenance').replaceChildren(h('dt', {}, 'task'), h('dd', {}, entry.ticket.taskType));
    $('detail-result').textContent = entry.ticket.openai ? 'An OpenAI API request: its result is not kept.' : 'loading…';
    this.renderTimeline(entry);
    if (!entry.ticket.openai) this.connection.send({ type: 'resume', ticketID: id });
    $('detail').showModal();
  }

  renderTimeline(entry) {
    $('detail-timeline').replaceChildren(...entry.timeline.map((e) =>
      h('li', {}, h('time', {}, e.t.toLocaleTimeString()), ` ${e.state}`, e.node ? ` on ${e.node}` : '', e.attempt > 1 ? ` (attempt ${e.attempt})` : '')));
  }

  // A resumed ticket's events; true when this was the detail's.
  onTicketEvent(event) {
    if (event.ticketID !== this.detailId) return false;
    if (event.type === 'done') {
      const s = event.stats || {};
      const rows = [['task', this.byId.get(event.ticketID)?.ticket.taskType], ['node', s.node], ['tier', s.tier], ['model', s.model],
        ['model digest', s.modelDigest], ['catalogue', s.catalog], ['seed', s.seed], ['engine', s.engine], ['stop', event.stopReason],
        ['prompt tokens', s.promptTokens], ['time to first token', ms(s.ttftMs)], ['total', ms(s.totalMs)]];
      $('detail-provenance').replaceChildren(...rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v === undefined ? '–' : String(v))]));
      $('detail-result').textContent = event.text;
      return true;
    }
    if (event.type === 'error') {
      $('detail-result').textContent = `${event.code}: ${event.message}`;
      return true;
    }
    return event.type === 'token' || event.type === 'retry';
  }
}
