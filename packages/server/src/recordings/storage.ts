import fs from 'node:fs';
import type { S3Client } from '@aws-sdk/client-s3';
import type { RecordingsS3Config } from '../media/config.ts';

/** The S3 SDK's parts this store uses, with its client. */
interface S3 {
  client: S3Client;
  sdk: typeof import('@aws-sdk/client-s3');
  getSignedUrl: typeof import('@aws-sdk/s3-request-presigner').getSignedUrl;
}

/**
 * Recordings in an S3-compatible object store (`SVC_RECORDINGS_S3_*`): each finished file is
 * uploaded under `<prefix><projectId>/<filepath>` and then removed from `DATA_DIR`; its download
 * URL is a presigned GET of the store (SigV4, at most 7 days). The AWS SDK is loaded when a store
 * is configured, not at startup: a node without one does not pay its memory (about 20 MiB of RSS)
 * or its load time.
 */
export class RecordingsS3 {
  private s3: Promise<S3> | null = null;

  constructor(private readonly cfg: RecordingsS3Config) {
    // Loaded now, in the background, so that the first upload or URL does not wait for it.
    this.loaded().catch(() => {});
  }

  /** The SDK and the client, loaded once (tried again on the next use if loading failed). */
  private loaded(): Promise<S3> {
    this.s3 ??= Promise.all([
      import('@aws-sdk/client-s3'),
      import('@aws-sdk/s3-request-presigner'),
    ]).then(
      ([sdk, presigner]) => ({
        sdk,
        getSignedUrl: presigner.getSignedUrl,
        client: new sdk.S3Client({
          region: this.cfg.region,
          ...(this.cfg.endpoint ? { endpoint: this.cfg.endpoint } : {}),
          forcePathStyle: this.cfg.forcePathStyle,
          ...(this.cfg.accessKeyId && this.cfg.secretAccessKey
            ? {
                credentials: {
                  accessKeyId: this.cfg.accessKeyId,
                  secretAccessKey: this.cfg.secretAccessKey,
                },
              }
            : {}),
          // Checksums only when the operation needs one (S3-compatible stores vary).
          requestChecksumCalculation: 'WHEN_REQUIRED',
          responseChecksumValidation: 'WHEN_REQUIRED',
        }),
      }),
      (err) => {
        this.s3 = null;
        throw err;
      },
    );
    return this.s3;
  }

  key(projectId: string, filepath: string) {
    return `${this.cfg.prefix}${projectId}/${filepath}`;
  }

  get bucket() {
    return this.cfg.bucket;
  }

  async upload(file: string, key: string, contentType: string) {
    const { client, sdk } = await this.loaded();
    await client.send(
      new sdk.PutObjectCommand({
        Bucket: this.cfg.bucket,
        Key: key,
        Body: fs.createReadStream(file),
        ContentLength: fs.statSync(file).size,
        ContentType: contentType,
      }),
    );
  }

  async presign(key: string, expiresIn: number, filename: string) {
    const { client, sdk, getSignedUrl } = await this.loaded();
    return getSignedUrl(
      client,
      new sdk.GetObjectCommand({
        Bucket: this.cfg.bucket,
        Key: key,
        ResponseContentDisposition: `attachment; filename="${filename}"`,
      }),
      { expiresIn },
    );
  }

  close() {
    this.s3?.then(({ client }) => client.destroy()).catch(() => {});
  }
}
