// The client scripts' checks (openai_client.mjs, anthropic_client.mjs): each
// runs on its own and prints `ok - NAME` or `not ok - NAME: why`; finish()
// prints the counts and exits non-zero when any failed.
let passed = 0, failed = 0;

export async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}: ${e.stack || e}`);
  }
}

export function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
