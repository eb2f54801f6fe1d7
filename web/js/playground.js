// The playground: a task of the catalogue, its arguments as a form built
// from the catalogue (required ones first; optional ones show their
// default), one ticket at a time over the page's WebSocket, its answer
// streamed, and a Stop that cancels it. Text a reasoning model wraps in
// <think>…</think> is shown apart from the answer.

import { h, $, ms, num } from './dom.js';

function splitReasoning(text) {
  const m = /^\s*<think>([\s\S]*?)(<\/think>|$)([\s\S]*)$/.exec(text);
  return m ? { reasoning: m[1], answer: m[3] } : { reasoning: '', answer: text };
}

export class Playground {
  constructor(connection) {
    this.connection = connection;
    this.tasks = {};
    this.current = null;  // ticketID in flight
    this.text = '';
    $('pg-task').addEventListener('change', () => this.renderArgs());
    $('pg-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.submit();
    });
    $('pg-stop').addEventListener('click', () => this.stop());
  }

  setCatalog(tasks) {
    const chosen = $('pg-task').value;
    this.tasks = tasks;
    const names = Object.keys(tasks).sort();
    $('pg-task').replaceChildren(...names.map((n) => h('option', { value: n }, n)));
    $('pg-task').value = names.includes(chosen) ? chosen : names.includes('chat') ? 'chat' : names[0] || '';
    this.renderArgs();
  }

  renderArgs() {
    const task = this.tasks[$('pg-task').value];
    if (!task) return;
    $('pg-description').textContent = `${task.description || ''} (tier ${task.tier}, up to ${task.max_tokens ?? '?'} tokens)`;
    const field = (name, required, fallback) => {
      const id = `pg-arg-${name}`;
      return h('div', { class: 'field' },
        h('label', { for: id }, name, required ? ' (required)' : ''),
        h('textarea', { id, name, rows: name === 'text' || name === 'question' ? '4' : '1', required, placeholder: required ? '' : `default: ${fallback}`, 'aria-describedby': `${id}-hint` }),
        h('small', { id: `${id}-hint`, class: 'muted' }, required ? 'required' : `optional; default “${fallback}”`));
    };
    $('pg-args').replaceChildren(
      ...(task.required || []).map((n) => field(n, true)),
      ...Object.entries(task.optional || {}).map(([n, d]) => field(n, false, d)));
  }

  submit() {
    if (this.current) return;
    const taskType = $('pg-task').value;
    const args = {};
    for (const el of $('pg-args').querySelectorAll('textarea')) if (el.value !== '') args[el.name] = el.value;
    const ticketID = `pg-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    if (!this.connection.send({ type: 'ticket', ticketID, taskType, isStreaming: true, args })) {
      $('pg-state').textContent = 'not connected; try again in a moment';
      return;
    }
    this.current = ticketID;
    this.text = '';
    this.show();
    $('pg-stats').textContent = '';
    $('pg-state').textContent = `sent ${ticketID}`;
    $('pg-submit').disabled = true;
    $('pg-stop').disabled = false;
  }

  // After a reconnect: the ticket in flight is still the node's for its
  // resume window (docs/protocol.md); its stream is sent again from the start.
  reattach() {
    if (this.current) this.connection.send({ type: 'resume', ticketID: this.current });
  }

  stop() {
    if (this.current) this.connection.send({ type: 'cancel', ticketID: this.current });
  }

  show() {
    const { reasoning, answer } = splitReasoning(this.text);
    const out = $('pg-output');
    out.replaceChildren(reasoning ? h('details', { class: 'reasoning', open: true }, h('summary', {}, 'reasoning'), reasoning) : '', answer);
  }

  finish(state) {
    $('pg-state').textContent = state;
    $('pg-submit').disabled = false;
    $('pg-stop').disabled = true;
    this.current = null;
  }

  // An event of the playground's ticket; true when it was one.
  onTicketEvent(event) {
    if (!this.current || event.ticketID !== this.current) return false;
    if (event.type === 'accepted') $('pg-state').textContent = event.position > 0 ? `queued (${event.position} ahead)` : 'running';
    if (event.type === 'token') {
      if (event.seq === 0) this.text = '';
      this.text += event.text;
      this.show();
      $('pg-state').textContent = 'streaming…';
    }
    if (event.type === 'retry') {
      this.text = '';
      this.show();
      $('pg-state').textContent = `running again (attempt ${event.attempt}): ${event.reason}`;
    }
    if (event.type === 'done') {
      this.text = event.text;
      this.show();
      const s = event.stats || {};
      $('pg-stats').textContent = `${s.generatedTokens} tokens at ${num(s.genTokPerSec, 1)} tok/s on ${s.node} · first token ${ms(s.ttftMs)} · stop: ${event.stopReason}`;
      this.finish('done');
    }
    if (event.type === 'error') this.finish(`${event.code}: ${event.message}`);
    return true;
  }
}
