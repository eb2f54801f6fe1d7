// OpenAI's Agents SDK (`@openai/agents`, on the `openai` client and `zod`)
// as a client of a running `revis serve` through the Responses API: an
// agent with a function tool runs its loop against the node (a required
// call, the tool's result sent back, the model's answer), plain and
// streamed, and a second run continues the first by previous_response_id.
// Usage: node agents_client.mjs NODE_URL TOKEN (run by npm_client.sh).
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Agent, OpenAIResponsesModel, run, setDefaultOpenAIClient, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { check, finish } from './checks.mjs';

const [nodeURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${nodeURL}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });
setDefaultOpenAIClient(client);
setTracingDisabled(true);  // traces would go to OpenAI

const cities = [];
const getWeather = tool({
  name: 'get_weather',
  description: 'Weather in a city',
  parameters: z.object({ city: z.string().max(12) }),
  execute: async ({ city }) => {
    cities.push(city);
    return `21 degrees in ${city}`;
  },
});
// The first turn must call the tool; the SDK then lets the model choose
// (resetToolChoice), and the tiny model answers with text.
const agent = new Agent({
  name: 'weather',
  instructions: 'Answer with the weather tool.',
  model: new OpenAIResponsesModel(client, 'default'),
  tools: [getWeather],
  modelSettings: { toolChoice: 'required', temperature: 0, maxTokens: 64 },
});

function kinds(items) {
  return items.map((item) => item.type);
}

let first = null;
await check('an agent turn: the tool is called with arguments that follow its schema, then an answer', async () => {
  first = await run(agent, 'Weather in Paris?', { maxTurns: 4 });
  assert.equal(cities.length, 1, JSON.stringify(cities));
  assert.equal(typeof cities[0], 'string');
  assert.ok(cities[0].length <= 12, cities[0]);
  const items = kinds(first.newItems);
  assert.deepEqual(items.slice(0, 2), ['tool_call_item', 'tool_call_output_item'], JSON.stringify(items));
  assert.equal(items.at(-1), 'message_output_item', JSON.stringify(items));
  assert.equal(typeof first.finalOutput, 'string');
  assert.match(first.lastResponseId, /^resp_/);
});

await check('the same turn streamed', async () => {
  const before = cities.length;
  const streamed = await run(agent, 'Weather in Paris?', { maxTurns: 4, stream: true });
  let deltas = 0;
  for await (const event of streamed)
    if (event.type === 'raw_model_stream_event' && event.data.type === 'output_text_delta') deltas++;
  await streamed.completed;
  assert.equal(cities.length, before + 1);
  assert.equal(cities.at(-1), cities[0], 'greedy: the same call streamed or not');
  assert.equal(streamed.finalOutput, first.finalOutput);
  assert.ok(deltas > 0 || first.finalOutput === '', 'text arrives as deltas');
});

await check('a second run continues the first by previous_response_id', async () => {
  assert.ok(first, 'needs the run above');
  const plain = new Agent({ name: 'plain', instructions: 'Be brief.', model: new OpenAIResponsesModel(client, 'default'),
    modelSettings: { temperature: 0, maxTokens: 4 } });
  const next = await run(plain, 'And tomorrow?', { previousResponseId: first.lastResponseId });
  assert.equal(typeof next.finalOutput, 'string');
  const kept = await client.responses.retrieve(next.lastResponseId);
  assert.equal(kept.previous_response_id, first.lastResponseId);
});

finish();
