import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { download, finish, kickOff, observation, patient, put, refs } from '../helpers/export.ts';

let t: TestApp;
beforeEach(async () => (t = await createTestApp()));
afterEach(async () => t.close());

describe('smoke', () => {
  test('system export', async () => {
    await put(t, patient('p1'));
    await put(t, observation('o1', 'p1'));
    const token = await t.token();
    const status = await kickOff(t, token, '/$export');
    const manifest = await finish(t, token, status);
    console.log(manifest);
    expect(refs(await download(t, token, manifest.output))).toEqual(['Observation/o1', 'Patient/p1']);
  });
});
