// The dashboard: wires the connection's events to the node cards, the
// ticket table, the charts and the playground. Everything arrives over the
// WebSocket's cluster feed (docs/protocol.md, "Following the cluster");
// nothing is polled.

import { $ } from './dom.js';
import { Connection, storeToken, probe } from './connection.js';
import { renderNodes } from './nodes.js';
import { Tickets } from './tickets.js';
import { Charts } from './charts.js';
import { Playground } from './playground.js';

const connection = new Connection({ onMessage, onState });
const tickets = new Tickets(connection);
const charts = new Charts($('chart-throughput'), $('chart-ttft'));
const playground = new Playground(connection);

function onState(state) {
  const pill = $('conn');
  if (state === 'token') {
    $('app').hidden = true;
    $('token-form').hidden = false;
    pill.textContent = 'token needed';
    $('token-input').focus();
    return;
  }
  pill.textContent = state === 'open' ? 'live' : 'reconnecting…';
  pill.dataset.state = state;
  if (state === 'open') {
    $('token-form').hidden = true;
    $('app').hidden = false;
    playground.reattach();
  }
}

function onMessage(event) {
  switch (event.type) {
    case 'catalog': return playground.setCatalog(event.tasks || {});
    case 'cluster':
      $('title-node').textContent = `· node ${event.view.node}`;
      return renderNodes($('nodes'), event.view);
    case 'ticketUpdate':
      tickets.update(event.ticket);
      return charts.add(event.ticket);
    default:
      if (event.ticketID) playground.onTicketEvent(event) || tickets.onTicketEvent(event);
  }
}

$('token-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const token = $('token-input').value;
  if ((await probe(token)) === 'token') {
    $('token-error').textContent = 'That token is not the node’s; try again.';
    return;
  }
  $('token-error').textContent = '';
  storeToken(token);
  $('token-input').value = '';
  connection.start();
});

// Tables and charts are redrawn at most a few times a second, however fast
// events come.
setInterval(() => {
  tickets.render();
  if (!$('app').hidden) charts.draw();
}, 250);

connection.start();
