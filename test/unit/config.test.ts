import { expect, test } from 'bun:test';
import { basePathOf, ConfigError, configEnv, loadConfig } from '../../src/config.ts';

test('a bad value stops with one line naming the variable and its flag', () => {
  expect(() => loadConfig({ CINDER_PORT: 'eighty' })).toThrow(ConfigError);
  expect(() => loadConfig({ CINDER_PORT: 'eighty' })).toThrow(/^invalid CINDER_PORT \(--port\): .*"eighty"/);
});

test('numbers are whole numbers in decimal digits: no hex, exponent or fraction', () => {
  expect(loadConfig({ CINDER_PORT: ' 8081 ' }).port).toBe(8081);
  expect(loadConfig({ CINDER_MAX_FORM_BYTES: '20000' }).maxFormBytes).toBe(20000);
  for (const bad of ['0x50', '1e3', '80.0', '-1', '+80', '0b1']) {
    expect(() => loadConfig({ CINDER_PORT: bad })).toThrow(/^invalid CINDER_PORT \(--port\): expected a whole number in decimal digits/);
  }
  expect(() => loadConfig({ CINDER_MAX_BODY_BYTES: '0x100000' })).toThrow(/^invalid CINDER_MAX_BODY_BYTES/);
  expect(() => loadConfig({ CINDER_PORT: '70000' })).toThrow(/^invalid CINDER_PORT \(--port\): .*65535/);
});

test('CINDER_PROCESSES: a count from 1 to 64, or auto for one per CPU up to 64', () => {
  expect(loadConfig({}).processes).toBe(1);
  expect(loadConfig({ CINDER_PROCESSES: '3' }).processes).toBe(3);
  expect(loadConfig({}, { processes: '2' }).processes).toBe(2);
  expect(loadConfig({ CINDER_PROCESSES: 'auto' }).processes).toBe(navigator.hardwareConcurrency);
  const cpus = Object.getOwnPropertyDescriptor(navigator, 'hardwareConcurrency');
  try {
    Object.defineProperty(navigator, 'hardwareConcurrency', { value: 128, configurable: true });
    expect(loadConfig({ CINDER_PROCESSES: 'auto' }).processes).toBe(64);
  } finally {
    if (cpus) Object.defineProperty(navigator, 'hardwareConcurrency', cpus);
    else delete (navigator as { hardwareConcurrency?: number }).hardwareConcurrency;
  }
  for (const bad of ['0', '65', '1.5', 'many']) expect(() => loadConfig({ CINDER_PROCESSES: bad })).toThrow(/^invalid CINDER_PROCESSES \(--processes\)/);
});

test('configEnv gives another process the same configuration', () => {
  const config = loadConfig({ CINDER_PORT: '9999', CINDER_DATA_DIR: '/tmp/cinder-x', CINDER_RATE_LIMITS: 'off' }, { logLevel: 'warn', processes: '4' });
  expect(loadConfig(configEnv(config))).toEqual(config);
});

test('CINDER_AUDIT: off by default, on or off, also as --audit', () => {
  expect(loadConfig({}).audit).toBe('off');
  expect(loadConfig({ CINDER_AUDIT: 'on' }).audit).toBe('on');
  expect(loadConfig({ CINDER_AUDIT: 'on' }, { audit: 'off' }).audit).toBe('off');
  expect(() => loadConfig({ CINDER_AUDIT: 'yes' })).toThrow(/^invalid CINDER_AUDIT \(--audit\)/);
  expect(loadConfig({}).auditFlushMs).toBe(1000);
  expect(loadConfig({}).auditQueueMax).toBe(20000);
  expect(loadConfig({ CINDER_AUDIT_QUEUE_MAX: '50' }).auditQueueMax).toBe(50);
  expect(() => loadConfig({ CINDER_AUDIT_FLUSH_MS: '5' })).toThrow(/^invalid CINDER_AUDIT_FLUSH_MS/);
});

test('CINDER_REFERENTIAL_INTEGRITY: off by default, on or off, also as --referential-integrity', () => {
  expect(loadConfig({}).referentialIntegrity).toBe('off');
  expect(loadConfig({ CINDER_REFERENTIAL_INTEGRITY: 'on' }).referentialIntegrity).toBe('on');
  expect(loadConfig({ CINDER_REFERENTIAL_INTEGRITY: 'on' }, { referentialIntegrity: 'off' }).referentialIntegrity).toBe('off');
  expect(() => loadConfig({ CINDER_REFERENTIAL_INTEGRITY: 'yes' })).toThrow(/^invalid CINDER_REFERENTIAL_INTEGRITY \(--referential-integrity\)/);
});

test('CINDER_BASE_URL: a path is kept (without a trailing slash); a query, a fragment or a ";" is refused, naming the variable', () => {
  expect(loadConfig({ CINDER_BASE_URL: 'https://example.org/cinder/' }).baseUrl).toBe('https://example.org/cinder');
  expect(basePathOf('https://example.org/cinder')).toBe('/cinder');
  expect(basePathOf(loadConfig({ CINDER_BASE_URL: 'https://example.org/' }).baseUrl)).toBe('');
  // Values that are no URL at all are named too (they escaped as a bare "Invalid URL").
  for (const bad of ['http://cinder.test/cinder?x=1', 'http://cinder.test/cinder#top', 'http://cinder.test/a;b', 'ftp://cinder.test', 'notaurl', 'http://', 'https://exa mple.org', 'http://x:99999']) {
    expect(() => loadConfig({ CINDER_BASE_URL: bad })).toThrow(/^invalid CINDER_BASE_URL \(--base-url\)/);
  }
});
