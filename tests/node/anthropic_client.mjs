// The official `@anthropic-ai/sdk` npm package as a client of a running
// `revis serve`: what coding agents speak, checked by a client nobody here
// wrote. Usage: node anthropic_client.mjs NODE_URL TOKEN (run by
// npm_client.sh, which installs the package and starts the node).
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { check, finish } from './checks.mjs';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const ask = {
  model: 'default', max_tokens: 8, temperature: 0, system: 'You are terse.',
  messages: [{ role: 'user', content: 'Name a river.' }],
};

let plain = '';
await check('messages.create without streaming', async () => {
  const m = await client.messages.create(ask);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.usage.output_tokens, 8);
  assert.ok(m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0) > 0);
  assert.equal(m.content[0].type, 'text');
  plain = m.content[0].text;
});

await check('messages.stream gives the same text and a final message', async () => {
  const stream = client.messages.stream(ask);
  let text = '';
  stream.on('text', (t) => { text += t; });
  const final = await stream.finalMessage();
  assert.equal(text, plain, 'greedy decoding gives the same text streamed or not');
  assert.equal(final.content[0].text, plain);
  assert.equal(final.stop_reason, 'max_tokens');
  assert.equal(final.usage.output_tokens, 8);
});

await check('tools: a forced tool_use comes back, streamed and not, and its result goes back in', async () => {
  const tools = [{
    name: 'get_weather', description: 'Weather in a city',
    input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] },
  }];
  const forced = { ...ask, max_tokens: 300, temperature: 1, tools, tool_choice: { type: 'tool', name: 'get_weather' } };
  const m = await client.messages.create(forced);
  assert.equal(m.stop_reason, 'tool_use');
  const call = m.content.find((b) => b.type === 'tool_use');
  assert.ok(call, JSON.stringify(m.content));
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof call.input.city, 'string');
  const streamed = await client.messages.stream(forced).finalMessage();
  const streamedCall = streamed.content.find((b) => b.type === 'tool_use');
  assert.equal(streamedCall?.name, 'get_weather');
  assert.equal(typeof streamedCall.input.city, 'string', 'the SDK assembled input_json_delta into an object');
  const next = await client.messages.create({
    ...ask, tools,
    messages: [...ask.messages, { role: 'assistant', content: m.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '21 degrees' }] }],
  });
  assert.equal(next.type, 'message');
});

await check('messages.countTokens is the prompt messages.create reports', async () => {
  const { max_tokens, temperature, ...body } = ask;
  const { input_tokens } = await client.messages.countTokens(body);
  const m = await client.messages.create(ask);
  // A prefix resumed from the node's cache is counted apart in the answer.
  assert.equal(input_tokens, m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0));
});

await check('a bad request raises BadRequestError', async () => {
  await assert.rejects(client.messages.create({ model: 'default', max_tokens: 4, messages: [] }),
    (e) => e instanceof Anthropic.BadRequestError && e.status === 400);
});

await check('a wrong key raises AuthenticationError', async () => {
  const wrong = new Anthropic({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrong.messages.create(ask), (e) => e instanceof Anthropic.AuthenticationError && e.status === 401);
});

finish();
