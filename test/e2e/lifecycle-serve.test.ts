/**
 * Cutting access across processes: a running `cinder serve` and the `cinder` command line as separate
 * processes on one database, an app driven by a real OAuth client library (oauth4webapi). A disabled
 * client comes to be refused by the token endpoint and its access token by the FHIR API (client cache,
 * revocation poll); a rotated secret likewise. That this happens within the documented 5 seconds is
 * tested on the app's clock, moved past those caches (test/http/lifecycle.test.ts, PAST_CACHES_MS);
 * here, that the server applies what another process recorded. From source and (when built) dist/cinder.
 */
import { describe, expect, test } from 'bun:test';
import * as oauth from 'oauth4webapi';
import { freePort } from '../helpers/export-e2e.ts';
import { cinderCommands, cleanupAfterFile, readBanner, serveEnv, spawnServe } from '../helpers/processes.ts';

const insecure = { [oauth.allowInsecureRequests]: true } as const;
/** Between two looks at the server while waiting for it to apply a change. */
const POLL_MS = 100;

const { tempDir } = cleanupAfterFile();

describe.each(cinderCommands())('cutting access beside a running cinder serve (%s)', (_, command) => {
  test('client disable, enable and rotate-secret recorded by the command line take effect in the server', async () => {
    const dir = tempDir('cinder-lifecycle-');
    const port = freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = serveEnv(dir, port);
    const cinder = async (...args: string[]) => {
      const p = Bun.spawn([...command, ...args, '--json'], { env, cwd: dir, stdout: 'pipe', stderr: 'pipe' });
      const [out, err, code] = [await new Response(p.stdout).text(), await new Response(p.stderr).text(), await p.exited];
      if (code !== 0) throw new Error(`cinder ${args.join(' ')}: ${code} ${err}`);
      return JSON.parse(out) as Record<string, string>;
    };
    const server = spawnServe(command, dir, env);
    try {
      await readBanner(server.stdout);
      const app = await cinder('client', 'create', '--tenant', 'default', '--name', 'Leaky app', '--scope', 'system/*.read');
      const issuer = new URL(base);
      const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oidc', ...insecure }));
      const client: oauth.Client = { client_id: app.client_id! };
      /** A client_credentials grant through oauth4webapi: the token, or the OAuth error code. */
      const grant = async (secret: string) => {
        const res = await oauth.clientCredentialsGrantRequest(as, client, oauth.ClientSecretBasic(secret), { scope: 'system/*.read' }, insecure);
        try {
          return { token: (await oauth.processClientCredentialsResponse(as, client, res)).access_token };
        } catch (err) {
          if (err instanceof oauth.ResponseBodyError) return { error: err.error, status: err.status };
          // invalid_client comes with the Basic challenge, which oauth4webapi reports as such; the body names the error.
          if (err instanceof oauth.WWWAuthenticateChallengeError) return { error: ((await err.response.json()) as { error: string }).error, status: err.status };
          throw err;
        }
      };
      /** The FHIR API's status for a read with `token` (a 401's Bearer challenge is what oauth4webapi throws). */
      const read = async (token: string) => {
        try {
          return (await oauth.protectedResourceRequest(token, 'GET', new URL(`${base}/tenants/default/fhir/R4/Patient`), undefined, undefined, insecure)).status;
        } catch (err) {
          if (err instanceof oauth.WWWAuthenticateChallengeError) return err.status;
          throw err;
        }
      };
      /** Looks until `check` holds (the test's timeout bounds it): the server applied the change; returns how many looks it took. */
      const applied = async (check: () => Promise<boolean>) => {
        let looks = 1;
        for (; !(await check()); looks++) await Bun.sleep(POLL_MS);
        return looks;
      };

      const first = (await grant(app.client_secret!)).token!;
      expect(await read(first)).toBe(200);
      await cinder('client', 'disable', app.client_id!);
      const refused = await applied(async () => (await grant(app.client_secret!)).error === 'invalid_client');
      const cut = await applied(async () => (await read(first)) === 401);
      expect(await grant(app.client_secret!)).toEqual({ error: 'invalid_client', status: 400 });

      await cinder('client', 'enable', app.client_id!);
      let second = '';
      const back = await applied(async () => !!(second = (await grant(app.client_secret!)).token ?? ''));
      expect(await read(second)).toBe(200);
      expect(await read(first)).toBe(401);

      const rotated = await cinder('client', 'rotate-secret', app.client_id!);
      const rotatedIn = await applied(async () => (await grant(app.client_secret!)).error === 'invalid_client' && (await read(second)) === 401);
      expect(await read((await grant(rotated.client_secret!)).token!)).toBe(200);
      console.log(`looks until applied (${POLL_MS} ms apart): disable ${refused}, its token ${cut} more; enable ${back}; rotate-secret ${rotatedIn}`);
    } finally {
      server.kill();
      await server.exited;
    }
  }, 60_000);
});
