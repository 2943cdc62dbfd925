/** A Subscription's rest-hook endpoint for tests of who is notified. */

/** A rest-hook receiver on a free port of 127.0.0.1 that keeps the bodies it is sent. */
export function receiver() {
  const got: string[] = [];
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: async (req) => (got.push(await req.text()), new Response(null, { status: 200 })) });
  return { url: `http://127.0.0.1:${server.port}/hook`, got, stop: () => server.stop(true) };
}
