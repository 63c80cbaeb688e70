export * from './admin.ts';
export * from './common.ts';
export * from './errors.ts';
export * from './links.ts';
export * from './products.ts';
export * from './realtime.ts';
export * from './verify.ts';
export * from './webhooks.ts';
