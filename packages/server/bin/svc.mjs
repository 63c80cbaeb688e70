#!/usr/bin/env node
// The `svc` command: runs the TypeScript CLI through tsx.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
