import fs from 'node:fs';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { RecordingsS3Config } from '../media/config.ts';

/**
 * Recordings in an S3-compatible object store (`SVC_RECORDINGS_S3_*`): each finished file is
 * uploaded under `<prefix><projectId>/<filepath>` and then removed from `DATA_DIR`; its download
 * URL is a presigned GET of the store (SigV4, at most 7 days).
 */
export class RecordingsS3 {
  private readonly client: S3Client;

  constructor(private readonly cfg: RecordingsS3Config) {
    this.client = new S3Client({
      region: cfg.region,
      ...(cfg.endpoint ? { endpoint: cfg.endpoint } : {}),
      forcePathStyle: cfg.forcePathStyle,
      ...(cfg.accessKeyId && cfg.secretAccessKey
        ? {
            credentials: {
              accessKeyId: cfg.accessKeyId,
              secretAccessKey: cfg.secretAccessKey,
            },
          }
        : {}),
      // Checksums only when the operation needs one (S3-compatible stores vary).
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  key(projectId: string, filepath: string) {
    return `${this.cfg.prefix}${projectId}/${filepath}`;
  }

  get bucket() {
    return this.cfg.bucket;
  }

  async upload(file: string, key: string, contentType: string) {
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.cfg.bucket,
        Key: key,
        Body: fs.createReadStream(file),
        ContentLength: fs.statSync(file).size,
        ContentType: contentType,
      }),
    );
  }

  presign(key: string, expiresIn: number, filename: string) {
    return getSignedUrl(
      this.client,
      new GetObjectCommand({
        Bucket: this.cfg.bucket,
        Key: key,
        ResponseContentDisposition: `attachment; filename="${filename}"`,
      }),
      { expiresIn },
    );
  }

  close() {
    this.client.destroy();
  }
}
