// The official `openai` npm package as a client of a running `revis serve`:
// a real client nobody here wrote, checking that the node's OpenAI API is
// what such clients expect. Usage: node openai_client.mjs NODE_URL TOKEN
// (run by npm_client.sh, which installs the package and starts the node).
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { check, finish } from './checks.mjs';

const [nodeURL, apiKey] = process.argv.slice(2);
const baseURL = `${nodeURL}/v1`;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Name a river.' },
];

await check('models.list lists the tiers', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes('default'), JSON.stringify(ids));
});

await check('models.retrieve gives a tier; an unknown name is NotFoundError', async () => {
  const m = await client.models.retrieve('default');
  assert.equal(m.id, 'default');
  assert.equal(m.object, 'model');
  await assert.rejects(client.models.retrieve('no-such-model'), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
});

let plain = '';
await check('chat.completions.create without streaming', async () => {
  const r = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 8);
  assert.ok(r.usage.prompt_tokens > 0);
  plain = r.choices[0].message.content;
});

await check('chat.completions.create with streaming', async () => {
  const stream = await client.chat.completions.create({
    model: 'default', messages, max_tokens: 8, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    text += chunk.choices[0].delta.content ?? '';
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  assert.ok(chunks >= 3, `${chunks} chunks`);
  assert.equal(finish, 'length');
  assert.equal(usage?.completion_tokens, 8);
  assert.equal(text, plain, 'greedy decoding gives the same text streamed or not');
});

await check('completions.create, plain and streamed', async () => {
  const r = await client.completions.create({ model: 'default', prompt: 'Once upon a time', max_tokens: 5, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.completion_tokens, 5);
  const stream = await client.completions.create({
    model: 'default', prompt: 'Once upon a time', max_tokens: 5, temperature: 0, stream: true,
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, r.choices[0].text);
});

await check('n choices come back indexed, streamed and not', async () => {
  const ask = { model: 'default', messages, max_tokens: 4, temperature: 1, seed: 11, n: 2 };
  const r = await client.chat.completions.create(ask);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  const texts = ['', ''];
  for await (const chunk of await client.chat.completions.create({ ...ask, stream: true }))
    for (const c of chunk.choices) texts[c.index] += c.delta.content ?? '';
  assert.deepEqual(texts, r.choices.map((c) => c.message.content));
});

await check('embeddings.create: the base64 the client asks for by default decodes to the floats', async () => {
  const input = ['a river', 'a mountain'];
  const coded = await client.embeddings.create({ model: 'default', input });
  const plain = await client.embeddings.create({ model: 'default', input, encoding_format: 'float' });
  assert.equal(coded.data.length, 2);
  assert.deepEqual(coded.data.map((d) => d.embedding), plain.data.map((d) => d.embedding));
  const norm = Math.hypot(...plain.data[1].embedding);
  assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
  assert.ok(plain.usage.prompt_tokens > 0);
});

await check('chat.completions.parse with a JSON schema gives the parsed object', async () => {
  const schema = {
    type: 'object', additionalProperties: false, required: ['river', 'km'],
    properties: { river: { type: 'string', maxLength: 16 }, km: { type: 'integer', minimum: 1, maximum: 9999 } },
  };
  // openai@4 keeps parse() under beta; later majors have it on chat.completions.
  const completions = client.chat.completions.parse ? client.chat.completions : client.beta.chat.completions;
  const r = await completions.parse({
    model: 'default', messages, max_tokens: 200, seed: 4,
    response_format: { type: 'json_schema', json_schema: { name: 'river', schema, strict: true } },
  });
  const parsed = r.choices[0].message.parsed;
  assert.equal(typeof parsed.river, 'string', JSON.stringify(parsed));
  assert.ok(parsed.river.length <= 16, JSON.stringify(parsed));
  assert.ok(Number.isInteger(parsed.km) && parsed.km >= 1 && parsed.km <= 9999, JSON.stringify(parsed));
});

await check('logprobs and top_logprobs come back per token', async () => {
  const r = await client.chat.completions.create({
    model: 'default', messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 2,
  });
  const content = r.choices[0].logprobs.content;
  assert.ok(content.length >= 1 && content.length <= 4, `${content.length} entries`);
  for (const t of content) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0, `${t.logprob}`);
    assert.equal(t.top_logprobs.length, 2);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
  }
});

await check('a bad request raises BadRequestError', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'default', messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.error?.type === 'invalid_request_error');
});

await check('tools: a required call comes back as tool_calls, streamed and not, and goes back in', async () => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather', description: 'Weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] },
    },
  }];
  const ask = { model: 'default', messages, tools, tool_choice: 'required', max_tokens: 300, seed: 3 };
  const r = await client.chat.completions.create(ask);
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const [call] = r.choices[0].message.tool_calls;
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.equal(typeof JSON.parse(call.function.arguments).city, 'string');
  // Streamed: the calls arrive as delta.tool_calls.
  const stream = await client.chat.completions.create({ ...ask, stream: true });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) calls[d.index] = d;
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(calls.length, 1);
  assert.deepEqual(JSON.parse(calls[0].function.arguments), JSON.parse(call.function.arguments));
  // The call and its result, as a client sends them back.
  const next = await client.chat.completions.create({
    model: 'default', max_tokens: 4,
    messages: [...messages, r.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '21 degrees' }],
    tools,
  });
  assert.equal(next.object, 'chat.completion');
});

await check('a wrong key raises AuthenticationError', async () => {
  const wrong = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

finish();
