// The official `openai` npm package's Responses API (responses.create,
// .stream, .parse, .retrieve, .delete) as a client of a running `revis
// serve`: a client nobody here wrote, checking that POST /v1/responses is
// what it expects, its event stream included (the SDK's stream helper
// rebuilds the response from the events and checks their order). Usage:
// node responses_client.mjs NODE_URL TOKEN (run by npm_client.sh, which
// installs the package and starts the node).
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { check, finish } from './checks.mjs';

const [nodeURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${nodeURL}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });
const ask = { model: 'default', instructions: 'You are terse.', input: 'Name a river.', max_output_tokens: 8, temperature: 0 };
const weather = {
  type: 'function', name: 'get_weather', description: 'Weather in a city', strict: true,
  parameters: {
    type: 'object', additionalProperties: false, required: ['city'],
    properties: { city: { type: 'string', maxLength: 12 } },
  },
};

let plain = '';
await check('responses.create without streaming', async () => {
  const r = await client.responses.create(ask);
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output[0].role, 'assistant');
  assert.equal(typeof r.output_text, 'string', 'the SDK gathers output_text from the message');
  assert.equal(r.output_text, r.output[0].content[0].text);
  assert.equal(r.usage.output_tokens, 8);
  assert.ok(r.usage.input_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  plain = r.output_text;
});

await check('responses.create with streaming: the same text, events in sequence', async () => {
  const stream = await client.responses.create({ ...ask, stream: true });
  let text = '', sequence = 0, last = null;
  for await (const event of stream) {
    assert.equal(event.sequence_number, sequence++);
    if (event.type === 'response.output_text.delta') text += event.delta;
    last = event;
  }
  assert.equal(last.type, 'response.incomplete');
  assert.equal(text, plain, 'greedy decoding gives the same text streamed or not');
  assert.equal(last.response.output[0].content[0].text, plain);
});

await check('responses.stream: the helper rebuilds the final response from the events', async () => {
  const stream = client.responses.stream(ask);
  let deltas = '';
  stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
  const r = await stream.finalResponse();
  assert.equal(r.output_text, plain);
  assert.equal(deltas, plain);
});

let call = null, callResponse = null;
await check('a required function call: arguments that parse and follow the schema, streamed alike', async () => {
  const request = { model: 'default', input: 'Weather in Paris?', tools: [weather], tool_choice: 'required', temperature: 0 };
  callResponse = await client.responses.create(request);
  assert.equal(callResponse.status, 'completed');
  call = callResponse.output.find((item) => item.type === 'function_call');
  assert.ok(call, JSON.stringify(callResponse.output));
  assert.equal(call.name, 'get_weather');
  assert.match(call.call_id, /./);
  const args = JSON.parse(call.arguments);
  assert.deepEqual(Object.keys(args), ['city']);
  assert.equal(typeof args.city, 'string');
  assert.ok(args.city.length <= 12, args.city);
  let streamedArgs = null;
  for await (const event of await client.responses.create({ ...request, stream: true }))
    if (event.type === 'response.function_call_arguments.done') streamedArgs = event.arguments;
  assert.equal(streamedArgs, call.arguments);
});

await check('previous_response_id continues with the function call output; retrieve and delete', async () => {
  assert.ok(call, 'needs the call above');
  const next = await client.responses.create({
    model: 'default', previous_response_id: callResponse.id, tools: [weather], max_output_tokens: 4,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '21 degrees' }],
  });
  assert.equal(next.object, 'response');
  assert.equal(next.previous_response_id, callResponse.id);
  assert.ok(next.usage.input_tokens > callResponse.usage.input_tokens, 'the earlier turn is in the prompt');
  const kept = await client.responses.retrieve(next.id);
  assert.equal(kept.id, next.id);
  assert.deepEqual(kept.output, next.output);
  await client.responses.delete(next.id);
  await assert.rejects(client.responses.retrieve(next.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(
    client.responses.create({ model: 'default', previous_response_id: next.id, input: 'And tomorrow?' }),
    (e) => e instanceof OpenAI.BadRequestError && /previous_response_id/.test(e.message));
});

await check('responses.parse with a JSON schema gives the parsed object', async () => {
  const schema = {
    type: 'object', additionalProperties: false, required: ['river', 'km'],
    properties: { river: { type: 'string', maxLength: 16 }, km: { type: 'integer', minimum: 1, maximum: 9999 } },
  };
  const r = await client.responses.parse({
    model: 'default', input: 'Name a river and its length.', max_output_tokens: 200,
    text: { format: { type: 'json_schema', name: 'river', schema, strict: true } },
  });
  const parsed = r.output_parsed;
  assert.equal(typeof parsed.river, 'string', JSON.stringify(parsed));
  assert.ok(parsed.river.length <= 16, JSON.stringify(parsed));
  assert.ok(Number.isInteger(parsed.km) && parsed.km >= 1 && parsed.km <= 9999, JSON.stringify(parsed));
});

await check('a built-in tool raises BadRequestError naming it', async () => {
  await assert.rejects(client.responses.create({ model: 'default', input: 'x', tools: [{ type: 'web_search' }] }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /tools\[0\]\.type/.test(e.message));
});

finish();
