// The official `ollama` npm package as a client of a running `revis serve`:
// what editors and UIs that speak Ollama's API see, checked by a client
// nobody here wrote. Usage: node ollama_client.mjs NODE_URL TOKEN (run by
// npm_client.sh, which installs the package and starts the node).
//
// Ollama's API has no tool_choice, so this tiny random model is never made
// to call a tool; `format` (a JSON schema, enforced by a grammar) checks
// the constrained path instead, and tool calls and results check that they
// go in and come out in Ollama's shapes.
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { check, finish } from './checks.mjs';

const [host, token] = process.argv.slice(2);
const client = new Ollama({ host, headers: { Authorization: `Bearer ${token}` } });
const model = 'default';
const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name a river.' }];
const options = { temperature: 0, num_predict: 8 };

await check('list names the tiers as models', async () => {
  const { models } = await client.list();
  const entry = models.find((m) => m.name === model);
  assert.ok(entry, JSON.stringify(models));
  assert.equal(entry.details.format, 'gguf');
  assert.ok(entry.size > 0);
});

await check('version', async () => {
  const { version } = await client.version();
  assert.match(version, /^\d+\.\d+\.\d+$/);
});

let plain = '';
await check('chat without streaming', async () => {
  const r = await client.chat({ model, messages, options, stream: false });
  assert.equal(r.done, true);
  assert.equal(r.done_reason, 'length');
  assert.equal(r.eval_count, 8);
  assert.ok(r.prompt_eval_count > 0);
  assert.equal(r.message.role, 'assistant');
  plain = r.message.content;
});

await check('chat streamed gives the same greedy text and a final done object', async () => {
  let text = '';
  let last;
  for await (const part of await client.chat({ model, messages, options, stream: true })) {
    text += part.message.content;
    last = part;
  }
  assert.equal(text, plain, 'greedy decoding gives the same text streamed or not');
  assert.equal(last.done, true);
  assert.equal(last.done_reason, 'length');
  assert.equal(last.eval_count, 8);
});

await check('generate, whole and streamed', async () => {
  const r = await client.generate({ model, prompt: 'Name a river.', options });
  assert.equal(r.done, true);
  assert.equal(typeof r.response, 'string');
  let text = '';
  for await (const part of await client.generate({ model, prompt: 'Name a river.', options, stream: true })) {
    text += part.response;
  }
  assert.equal(text, r.response);
});

await check('format: a JSON schema constrains the answer', async () => {
  const format = {
    type: 'object', properties: { city: { type: 'string', maxLength: 12 }, n: { type: 'integer' } },
    required: ['city', 'n'],
  };
  const r = await client.chat({ model, messages, format, options: { temperature: 1, seed: 3 } });
  const value = JSON.parse(r.message.content);
  assert.equal(typeof value.city, 'string');
  assert.ok(Number.isInteger(value.n), r.message.content);
});

await check('tools: calls and results go in, the answer comes out in Ollama\'s shapes', async () => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather', description: 'Weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  }];
  const r = await client.chat({
    model, tools, options,
    messages: [...messages,
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
      { role: 'tool', content: '21 degrees', tool_name: 'get_weather' }],
  });
  assert.equal(r.done, true);
  assert.ok(r.prompt_eval_count > 40, 'the tools and the call are in the prompt');
  for (const call of r.message.tool_calls ?? []) assert.equal(typeof call.function.arguments, 'object');
});

await check('embed', async () => {
  const r = await client.embed({ model, input: ['a river', 'a mountain'] });
  assert.equal(r.embeddings.length, 2);
  assert.ok(r.embeddings[0].length > 0);
  assert.equal(r.embeddings[0].length, r.embeddings[1].length);
});

await check('show', async () => {
  const r = await client.show({ model });
  assert.equal(r.details.format, 'gguf');
  assert.ok(r.template.length > 0);
  assert.ok(r.capabilities.includes('tools'));
});

await check('ps lists the loaded model', async () => {
  const { models } = await client.ps();
  assert.ok(models.some((m) => m.name === model), JSON.stringify(models));
});

await check('a refused option raises ResponseError naming it', async () => {
  await assert.rejects(client.chat({ model, messages, options: { mirostat: 2 } }),
    (e) => e.name === 'ResponseError' && e.status_code === 400 && /options\.mirostat/.test(e.error));
});

await check('pull is refused', async () => {
  await assert.rejects(client.pull({ model: 'llama3' }), (e) => e.status_code === 400 && /\/api\/pull/.test(e.error));
});

finish();
