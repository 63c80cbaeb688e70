export * from './admin.ts';
export * from './common.ts';
export * from './errors.ts';
export * from './products.ts';
export * from './webhooks.ts';
