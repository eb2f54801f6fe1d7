// The dashboard in a real browser: Debian's chromium, driven by
// playwright-core, against real `revis serve` nodes on the simulated engine.
// Usage: node dashboard.test.mjs REVIS_BINARY ARTIFACTS_DIR
// Exit 0 when every check passed; screenshots go to ARTIFACTS_DIR and
// their paths are printed.
import { spawn, execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [revis, artifacts] = process.argv.slice(2);
const HEARTBEAT_MS = 300;  // the link is down after 3 heartbeats
mkdirSync(artifacts, { recursive: true });
const nodes = [];
const shots = [];

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function serve(name, port, extra) {
  const child = spawn(revis, ['serve', '--engine', 'sim', '--sim-tokens-per-s', '200', '--name', name, '--port', String(port),
    '--heartbeat-ms', String(HEARTBEAT_MS), ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => { log += d; });
  const node = { name, port, child, log: () => log };
  nodes.push(node);
  return node;
}

async function ready(node) {
  for (let i = 0; i < 200; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${node.port}/health`);
      if (r.ok) return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`node ${node.name} did not start:\n${node.log()}`);
}

async function shot(page, name, fullPage = true) {
  const path = join(artifacts, `${name}.png`);
  await page.screenshot({ path, fullPage });
  shots.push(path);
}

function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
  console.log(`ok - ${what}`);
}

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium' });
let failed = false;
try {
  const [pa, pb, pc] = [await freePort(), await freePort(), await freePort()];
  const a = serve('a', pa, ['--peer', `127.0.0.1:${pb}`]);
  const b = serve('b', pb, ['--peer', `127.0.0.1:${pa}`]);
  await ready(a);
  await ready(b);

  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  page.on('pageerror', (e) => { console.log(`page error: ${e}`); failed = true; });
  page.on('console', (m) => { if (m.type() === 'error') { console.log(`console error: ${m.text()}`); failed = true; } });
  await page.goto(`http://127.0.0.1:${pa}/`);
  await page.locator('[data-node="a"]').waitFor({ timeout: 10000 });
  await page.locator('[data-node="b"][data-state="idle"]').waitFor({ timeout: 10000 });
  check(true, 'both node cards appear');
  const slots = await page.locator('[data-node="b"] dt:text-is("slots") + dd').textContent();
  check(slots === '0 / 1', `an idle one-slot node shows its slots free (${slots})`);

  // The playground: a ticket whose text streams in, then done on a node.
  await page.selectOption('#pg-task', 'chat');
  await page.fill('#pg-arg-message', 'Hello from the browser test');
  await page.click('#pg-submit');
  await page.locator('#pg-state', { hasText: 'streaming' }).waitFor({ timeout: 10000 });
  const partial = await page.textContent('#pg-output');
  check(partial.length > 0, `the answer streams (${partial.length} characters before done)`);
  await page.locator('#pg-state', { hasText: /^done$/ }).waitFor({ timeout: 30000 });
  const final = await page.textContent('#pg-output');
  check(final.length >= partial.length, 'the answer is complete when done');
  const row = page.locator('#tickets tbody tr[data-state="done"]').first();
  await row.waitFor({ timeout: 5000 });
  const ranOn = await row.locator('td').nth(3).textContent();
  check(ranOn === 'a' || ranOn === 'b', `the playground ticket is done on node ${ranOn}`);

  // A ticket from another client (revis submit, over the WebSocket).
  await new Promise((resolve, reject) => execFile(revis, ['submit', '--node', `127.0.0.1:${pa}`, '--task', 'summarize',
    '--arg', 'text=from another client', '--id', 'other-client-1'], (err) => (err ? reject(err) : resolve())));
  await page.locator('tr[data-ticket="other-client-1"][data-state="done"]').waitFor({ timeout: 10000 });
  check(true, 'a ticket sent by another client appears in the table as done');
  await shot(page, 'dashboard');

  // The view while a ticket streams (the README's picture).
  await page.selectOption('#pg-task', 'translate');
  await page.fill('#pg-arg-text', 'Hola, mundo.');
  await page.fill('#pg-arg-to', 'English');
  await page.click('#pg-submit');
  await page.locator('[data-state="busy"] progress').waitFor({ timeout: 10000 });
  await page.locator('#pg-state', { hasText: 'streaming' }).waitFor({ timeout: 10000 });
  await page.waitForTimeout(700);
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot(page, 'dashboard-live', false);
  await page.click('#pg-stop');
  await page.locator('#pg-state', { hasText: 'cancelled' }).waitFor({ timeout: 5000 });
  check(await page.isEnabled('#pg-submit'), 'Stop cancels the playground ticket');

  // Its detail: result and provenance, by keyboard. The focus stays on its
  // row while another ticket's arrival redraws the table.
  await page.locator('tr[data-ticket="other-client-1"] button').focus();
  await new Promise((resolve, reject) => execFile(revis, ['submit', '--node', `127.0.0.1:${pa}`, '--task', 'summarize',
    '--arg', 'text=while the focus waits', '--id', 'other-client-2'], (err) => (err ? reject(err) : resolve())));
  await page.locator('tr[data-ticket="other-client-2"][data-state="done"]').waitFor({ timeout: 10000 });
  const focusedRow = await page.evaluate(() => document.activeElement?.closest('tr')?.dataset.ticket);
  check(focusedRow === 'other-client-1', `the focus stays on its row while the table redraws (${focusedRow})`);
  await page.keyboard.press('Enter');
  await page.locator('#detail-provenance dd', { hasText: /^sha256/ }).first().waitFor({ timeout: 5000 });
  check((await page.textContent('#detail-result')).length > 0, 'the ticket detail shows its result and provenance');
  const seed = await page.locator('#detail-provenance dt:text-is("seed") + dd').textContent();
  const result = await new Promise((resolve, reject) => execFile(revis, ['submit', '--node', `127.0.0.1:${pa}`, '--task', 'summarize',
    '--arg', 'text=from another client', '--id', 'other-client-1', '--json'], (err, out) => (err ? reject(err) : resolve(JSON.parse(
      out.replace(/"seed":\s*(\d+)/, '"seed":"$1"'))))));
  check(seed === String(result.stats.seed), `the detail shows the exact 64-bit seed (${seed})`);
  await shot(page, 'ticket-detail');
  await page.keyboard.press('Escape');

  // Phone width.
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'phone');
  await page.setViewportSize({ width: 1200, height: 900 });

  // Node b killed: its card is offline within the heartbeat timeout.
  b.child.kill('SIGKILL');
  const killed = Date.now();
  await page.locator('[data-node="b"][data-state="offline"]').waitFor({ timeout: 10000 });
  const took = Date.now() - killed;
  check(took < 3 * HEARTBEAT_MS + 1500, `node b shows offline ${took} ms after it was killed (heartbeat timeout ${3 * HEARTBEAT_MS} ms)`);
  await shot(page, 'node-offline');

  // A node with a token: nothing loads before it is entered.
  const c = serve('c', pc, ['--token', 'web-s3cret']);
  await ready(c);
  const locked = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  let sockets = 0;
  locked.on('websocket', () => { sockets++; });
  await locked.goto(`http://127.0.0.1:${pc}/`);
  await locked.locator('#token-form:not([hidden])').waitFor({ timeout: 10000 });
  await locked.waitForTimeout(500);
  check(sockets === 0 && (await locked.locator('[data-node]').count()) === 0 && await locked.locator('#app').isHidden(),
    'with --token, no WebSocket and no data before the token is entered');
  await shot(locked, 'token-prompt');
  await locked.fill('#token-input', 'wrong');
  await locked.click('#token-form button');
  await locked.locator('#token-error', { hasText: 'not' }).waitFor({ timeout: 5000 });
  check(sockets === 0, 'a wrong token is refused');
  await locked.fill('#token-input', 'web-s3cret');
  await locked.keyboard.press('Enter');
  await locked.locator('[data-node="c"]').waitFor({ timeout: 10000 });
  await locked.selectOption('#pg-task', 'chat');
  await locked.fill('#pg-arg-message', 'with a token');
  await locked.click('#pg-submit');
  await locked.locator('#pg-state', { hasText: /^done$/ }).waitFor({ timeout: 30000 });
  check(true, 'with the token entered, the page works');
  await locked.reload();
  await locked.locator('[data-node="c"]').waitFor({ timeout: 10000 });
  check(true, 'the token is kept for the tab (asked once)');
  await shot(locked, 'with-token');

  // The node restarts: the page reconnects by itself.
  c.child.kill('SIGTERM');
  await new Promise((resolve) => c.child.once('exit', resolve));
  await locked.locator('#conn', { hasText: 'reconnecting' }).waitFor({ timeout: 10000 });
  const again = serve('c', pc, ['--token', 'web-s3cret']);
  await ready(again);
  await locked.locator('#conn', { hasText: 'live' }).waitFor({ timeout: 15000 });
  await locked.locator('[data-node="c"]').waitFor({ timeout: 5000 });
  check(await locked.locator('#token-form').isHidden(), 'after a restart of its node the page reconnects by itself, token kept');
} catch (e) {
  console.log(`FAILED: ${e.message}`);
  for (const n of nodes) console.log(`--- log of node ${n.name}:\n${n.log().split('\n').slice(-30).join('\n')}`);
  failed = true;
} finally {
  await browser.close();
  for (const n of nodes) n.child.kill('SIGTERM');
  console.log('screenshots:');
  for (const s of shots) console.log(`  ${s}`);
}
process.exit(failed ? 1 : 0);
