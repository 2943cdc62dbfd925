import { expect, test } from 'bun:test';
import { createMetrics } from '../../src/http/metrics.ts';

test('request latency renders as a cumulative Prometheus histogram', async () => {
  const m = createMetrics();
  for (const s of [0.0001, 0.003, 0.003, 20]) m.observeRequest('GET', '/r', 200, s);
  const text = await m.render();
  const bucket = (le: string) => Number(new RegExp(`_bucket\\{method="GET",route="/r",status="200",le="${le.replace('+', '\\+')}"\\} (\\d+)`).exec(text)?.[1]);
  expect(bucket('0.001')).toBe(1);
  expect(bucket('0.0025')).toBe(1);
  expect(bucket('0.005')).toBe(3);
  expect(bucket('10')).toBe(3);
  expect(bucket('+Inf')).toBe(4);
  expect(text).toContain('cinder_http_request_duration_seconds_count{method="GET",route="/r",status="200"} 4');
  expect(text).toContain('cinder_http_requests_total{method="GET",route="/r",status="200"} 4');
});
