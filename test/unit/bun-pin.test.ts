import { expect, test } from 'bun:test';

const read = (path: string) => Bun.file(new URL(`../../${path}`, import.meta.url)).text();

test("the README's setup, CI and the Dockerfile install one Bun version", async () => {
  const docker = /^ARG BUN_VERSION=(\S+)$/m.exec(await read('Dockerfile'))?.[1];
  const readme = /^npm install -g bun@(\S+) && bun install && bun run start$/m.exec(await read('README.md'))?.[1];
  const ci = /npm install -g bun@(\S+) &&/.exec(await read('.ci/run'))?.[1];
  expect(docker).toMatch(/^\d+\.\d+\.\d+$/);
  expect({ readme, ci }).toEqual({ readme: docker, ci: docker });
});
