/**
 * Failed sign-ins at the login page, from the addresses they come from (a trusted proxy's X-Forwarded-For). Counted
 * per user alone, five wrong passwords from anyone locked the user out for 15 minutes everywhere: whoever knew a
 * username could keep its owner from signing in. Now they are counted per user and address, bounded per user in
 * all, and a browser the user signed in with (its device cookie) is counted on its own. Both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { LOGIN_WINDOW_MS } from '../../src/auth/rate-limit.ts';
import { sha256Hex } from '../../src/auth/secrets.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { authorizeQuery, csrfCookie, FORM, hiddenFields, PASSWORD, testUser, userClient } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** Failures per user and address (and per device), per user in all. */
const PER_ADDRESS = 3;
const PER_USER = 7;

for (const target of targets) {
  describe(`failed sign-ins, on ${target.kind}`, () => {
    let t: TestApp;
    let clientId: string;

    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({
        store, env: { CINDER_TRUST_PROXY: 'on', CINDER_LOGIN_FAILURES_USER: String(PER_ADDRESS), CINDER_LOGIN_FAILURES_USER_TOTAL: String(PER_USER) },
      });
      clientId = (await userClient(t)).id;
      await testUser(t);
    }, 120_000);
    afterAll(() => t.close());

    /** Opens the login page and posts the credentials from `ip`, with a device cookie when given. */
    async function attempt(ip: string, password: string, device?: string, username = 'alice'): Promise<Response> {
      const from = { 'X-Forwarded-For': ip };
      const page = await t.request(`/oauth2/authorize?${authorizeQuery({ clientId })}`, { headers: from });
      expect(page.status).toBe(200);
      const fields = hiddenFields(await page.text());
      const cookie = [csrfCookie(page), ...(device === undefined ? [] : [`cinder_device=${device}`])].join('; ');
      return t.request('/oauth2/authorize', {
        method: 'POST', headers: { ...FORM, ...from, Cookie: cookie }, body: new URLSearchParams({ ...fields, username, password, action: 'login' }),
      });
    }
    const status = async (ip: string, password: string, device?: string) => (await attempt(ip, password, device)).status;
    /** The device cookie a sign-in gave, with its attributes. */
    const deviceCookie = (res: Response) => res.headers.getSetCookie().find((c) => c.startsWith('cinder_device='));
    const deviceOf = (res: Response) => deviceCookie(res)!.split(';')[0]!.slice('cinder_device='.length);
    const nextWindow = () => t.clock.advance(LOGIN_WINDOW_MS + 1000);

    test('wrong passwords from one address make that address wait for the user, not the user elsewhere', async () => {
      for (let i = 0; i < PER_ADDRESS; i++) expect(await status('203.0.113.1', 'nope-nope')).toBe(200);
      const waiting = await attempt('203.0.113.1', PASSWORD);
      expect(waiting.status).toBe(429);
      expect(Number(waiting.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await waiting.text()).toContain('Too many failed sign-in attempts');
      // The user, from another address, signs in; a neighbour in the same IPv6 /64 counts as the same address.
      expect(await status('203.0.113.2', PASSWORD)).toBe(303);
      for (let i = 0; i < PER_ADDRESS; i++) expect(await status('2001:db8:1:2::a', 'nope-nope')).toBe(200);
      expect(await status('2001:db8:1:2::b', PASSWORD)).toBe(429);
      nextWindow();
      expect(await status('203.0.113.1', PASSWORD)).toBe(303);
    });

    test('guesses spread over many addresses are bounded per user in all: brute force stays slow', async () => {
      let failures = 0;
      for (let host = 10; failures < PER_USER; host++) {
        for (let i = 0; i < PER_ADDRESS - 1 && failures < PER_USER; i++, failures++) expect(await status(`198.51.100.${host}`, 'nope-nope')).toBe(200);
      }
      expect(await status('198.51.100.99', 'nope-nope')).toBe(429);
      expect(await status('198.51.100.99', PASSWORD)).toBe(429);
      nextWindow();
      expect(await status('198.51.100.99', PASSWORD)).toBe(303);
    });

    test("a browser the user signed in with signs in while others' guesses hold the user elsewhere; its own failures are counted", async () => {
      const first = await attempt('192.0.2.1', PASSWORD);
      expect(first.status).toBe(303);
      expect(deviceCookie(first)).toMatch(/^cinder_device=[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+; Path=\/oauth2\/authorize; HttpOnly; SameSite=Strict; Max-Age=2592000$/);
      const device = deviceOf(first);
      // Guesses from many addresses reach the user's bound.
      for (let i = 0; i < PER_USER; i++) expect(await status(`198.51.100.${120 + Math.floor(i / (PER_ADDRESS - 1))}`, 'nope-nope')).toBe(200);
      expect(await status('192.0.2.50', PASSWORD)).toBe(429);
      // Altered, or of another user, a cookie is no device of the user's.
      // (A character in the middle: the last one also carries padding bits, and may be changed alone to the same value.)
      const at = Math.floor(device.length / 2);
      expect(await status('192.0.2.50', PASSWORD, `${device.slice(0, at)}${device[at] === 'A' ? 'B' : 'A'}${device.slice(at + 1)}`)).toBe(429);
      const other = await attempt('192.0.2.51', 'nope-nope', device, 'bob');
      expect(other.status).toBe(200);
      expect(deviceCookie(other)).toBeUndefined();
      // The user's browser, from wherever it is now, signs in, and is given a new cookie.
      const again = await attempt('192.0.2.50', PASSWORD, device);
      expect(again.status).toBe(303);
      const renewed = deviceOf(again);
      expect(renewed).not.toBe(device);
      // Wrong passwords from that browser are counted on their own.
      for (let i = 0; i < PER_ADDRESS; i++) expect(await status('192.0.2.50', 'nope-nope', renewed)).toBe(200);
      expect(await status('192.0.2.50', PASSWORD, renewed)).toBe(429);
      nextWindow();
      expect(await status('192.0.2.50', PASSWORD, renewed)).toBe(303);
    });

    test("a device cookie of one user is no device of another whose username differs only in case (usernames are case-sensitive)", async () => {
      nextWindow();
      await testUser(t, { username: 'Alice', password: 'another secret password', email: 'alice.two@example.org' });
      // The holder of the account alice signs in as often as it likes, a new cookie each time.
      const cookies: string[] = [];
      for (let i = 0; i < 2; i++) {
        const res = await attempt('192.0.2.80', PASSWORD);
        expect(res.status).toBe(303);
        cookies.push(deviceOf(res));
      }
      // Guesses at Alice's password with them are counted as the address's, not under a device of Alice's.
      for (let i = 0; i < PER_ADDRESS; i++) expect((await attempt('192.0.2.80', 'nope-nope', cookies[0], 'Alice')).status).toBe(200);
      expect((await attempt('192.0.2.80', 'nope-nope', cookies[1], 'Alice')).status).toBe(429);
      // Nor do alice's own failures with her cookies count against Alice's browsers.
      for (let i = 0; i < PER_USER + 1; i++) expect((await attempt(`192.0.2.${90 + (i % 2)}`, 'nope-nope', cookies[i % 2])).status).toBe(i < PER_ADDRESS * 2 ? 200 : 429);
      const alices = await attempt('192.0.2.100', 'another secret password', undefined, 'Alice');
      expect(alices.status).toBe(303);
      expect((await attempt('192.0.2.100', 'another secret password', deviceOf(alices), 'Alice')).status).toBe(303);
    });

    test('failures at one username are not counted against another that differs only in case, nor is a very long username kept as a key', async () => {
      nextWindow();
      await testUser(t, { username: 'ALICE', password: 'a third secret password', email: 'alice.three@example.org' });
      // Every guess at alice from this address and the user's total: ALICE from the same address is not kept waiting.
      for (let i = 0; i < PER_USER; i++) expect((await attempt(`192.0.2.${140 + (i % 2)}`, 'nope-nope')).status).toBe(i < PER_ADDRESS * 2 ? 200 : 429);
      expect((await attempt('192.0.2.140', 'a third secret password', undefined, 'ALICE')).status).toBe(303);
      // A 10,000-character username is counted under a digest of it, not under its text.
      const long = 'x'.repeat(10_000);
      expect((await attempt('192.0.2.150', 'nope-nope', undefined, long)).status).toBe(200);
      const now = t.clock.now();
      expect((await t.store.counters.peek(`login-user:t1:${long}`, now)).count).toBe(0);
      expect((await t.store.counters.peek(`login-user:t1:sha256:${sha256Hex(long)}`, now)).count).toBe(1);
    });

    test("the user's browsers together are bounded as the other addresses are: the cookies of many sign-ins do not multiply the guesses", async () => {
      nextWindow();
      // Someone who knew the password (changed since) signed in again and again, keeping each sign-in's cookie.
      const devices: string[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await attempt(`192.0.2.${60 + i}`, PASSWORD);
        expect(res.status).toBe(303);
        devices.push(deviceOf(res));
      }
      // Each cookie guesses up to its own limit, until the user's devices reach the per-user total together.
      let failures = 0;
      for (const device of devices) {
        for (let i = 0; i < PER_ADDRESS - 1 && failures < PER_USER; i++, failures++) expect(await status('192.0.2.70', 'nope-nope', device)).toBe(200);
      }
      expect(failures).toBe(PER_USER - 1);
      expect(await status('192.0.2.70', 'nope-nope', devices[2])).toBe(200);
      for (const device of devices) expect(await status('192.0.2.70', 'nope-nope', device)).toBe(429);
      // Those devices' guesses hold no one at an address without a cookie.
      expect(await status('192.0.2.71', PASSWORD)).toBe(303);
      nextWindow();
      expect(await status('192.0.2.70', PASSWORD, devices[0])).toBe(303);
    });
  });
}
