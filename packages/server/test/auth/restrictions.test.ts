import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  ipAllowed,
  normaliseOriginPattern,
  originAllowed,
  parseIpRange,
  requestOrigin,
} from '../../src/auth/restrictions.ts';

test('wildcard origins match subdomains at any depth, nothing else', () => {
  const patterns = [normaliseOriginPattern('https://*.example.com')!];
  for (const yes of ['https://a.example.com', 'https://a.b.example.com']) {
    assert.equal(originAllowed(requestOrigin(yes, undefined)!, patterns), true, yes);
  }
  for (const no of [
    'https://example.com',
    'https://evilexample.com',
    'https://example.com.evil.com',
    'http://a.example.com',
    'https://a.example.com:8443',
  ]) {
    assert.equal(originAllowed(requestOrigin(no, undefined)!, patterns), false, no);
  }
});

test('exact origins match exactly, default ports normalised', () => {
  const patterns = [normaliseOriginPattern('https://app.example.com:443')!];
  assert.equal(originAllowed(requestOrigin('https://app.example.com', undefined)!, patterns), true);
  assert.equal(
    originAllowed(requestOrigin('https://app.example.com:444', undefined)!, patterns),
    false,
  );
});

test('bad origin patterns are refused', () => {
  for (const bad of [
    'example.com',
    'https://example.com/path',
    'ftp://x.com',
    'https://*',
    'https://a.*.com',
    '*',
  ]) {
    assert.equal(normaliseOriginPattern(bad), null, bad);
  }
});

test('Referer gives the origin when Origin is missing', () => {
  assert.equal(requestOrigin(undefined, 'https://a.example.com/page?x=1'), 'https://a.example.com');
  assert.equal(requestOrigin('null', undefined), null);
  assert.equal(requestOrigin(undefined, 'not a url'), null);
});

test('CIDR v4, v6 and IPv4-mapped addresses', () => {
  const ranges = ['10.1.0.0/16', '2001:db8::/32', '192.0.2.7'].map((r) => parseIpRange(r)!);
  assert.equal(ipAllowed('10.1.200.3', ranges), true);
  assert.equal(ipAllowed('10.2.0.1', ranges), false);
  assert.equal(ipAllowed('2001:db8:1::5', ranges), true);
  assert.equal(ipAllowed('2001:db9::1', ranges), false);
  assert.equal(ipAllowed('::ffff:10.1.0.9', ranges), true);
  assert.equal(ipAllowed('::ffff:192.0.2.7', ranges), true);
  assert.equal(ipAllowed('192.0.2.8', ranges), false);
  const mapped = [parseIpRange('::ffff:172.16.0.0/108')!];
  assert.equal(ipAllowed('172.16.5.5', mapped), true);
  assert.equal(parseIpRange('10.0.0.0/33'), null);
  assert.equal(parseIpRange('banana'), null);
});
