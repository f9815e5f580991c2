import { expect } from 'chai';
import type { RedisClient } from './redis.js';
import { Metrics } from './metrics.js';

/** The request metrics are counted as plain numbers and rendered at scrape; the text must be Prometheus's. */
describe('request metrics (http_requests_total, http_request_duration_seconds)', () => {
  // Request metrics read nothing from Redis; the gauges that do are not scraped here.
  const metrics = new Metrics({} as RedisClient, 4, () => 0);
  metrics.observe('content-service/content', 'POST', 201, 0.0004);
  metrics.observe('content-service/content', 'POST', 201, 0.003);
  metrics.observe('content-service/content', 'POST', 400, 0.0004);
  metrics.observe('health', 'GET', 200, 12);

  it('counts answers by route, method and status', async () => {
    const text = await metrics.registry.getSingleMetricAsString('http_requests_total');
    expect(text).to.contain('http_requests_total{route="content-service/content",method="POST",status="201"} 2');
    expect(text).to.contain('http_requests_total{route="content-service/content",method="POST",status="400"} 1');
    expect(text).to.contain('http_requests_total{route="health",method="GET",status="200"} 1');
  });

  it('renders cumulative latency buckets by route, with +Inf, sum and count', async () => {
    const text = await metrics.registry.getSingleMetricAsString('http_request_duration_seconds');
    const route = 'content-service/content';
    const bucket = (le: string, r = route) =>
      new RegExp(`^http_request_duration_seconds_bucket\\{le="${le.replace('+', '\\+')}",route="${r}"\\} (\\S+)$`, 'm').exec(text)?.[1];
    expect(text).to.contain('# TYPE http_request_duration_seconds histogram');
    expect(bucket('0.0005')).to.equal('2');
    expect(bucket('0.002')).to.equal('2');
    expect(bucket('0.005')).to.equal('3');
    expect(bucket('10')).to.equal('3');
    expect(bucket('+Inf')).to.equal('3');
    expect(text).to.match(new RegExp(`^http_request_duration_seconds_count\\{route="${route}"\\} 3$`, 'm'));
    expect(Number(/^http_request_duration_seconds_sum\{route="content-service\/content"\} (\S+)$/m.exec(text)?.[1])).to.be.closeTo(0.0038, 1e-9);
    // past the last bound: only +Inf counts it
    expect(bucket('10', 'health')).to.equal('0');
    expect(bucket('+Inf', 'health')).to.equal('1');
  });
});
