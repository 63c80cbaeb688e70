/**
 * Domain events (`room.started`, `participant.joined`, `recording.completed`…): emitted at one
 * place by the area where they happen, consumed by sinks such as the webhook outbox.
 */
export interface DomainEvent {
  projectId: string;
  /** Dotted type, e.g. `participant.joined`. */
  type: string;
  /** Event payload, JSON-serialisable. */
  data: Record<string, unknown>;
  /**
   * Events with the same ordering key (e.g. `room:<projectId>:<roomName>`) must reach each
   * consumer in emission order.
   */
  orderingKey?: string;
  /** When it happened (ms since epoch); the emitter's clock. */
  occurredAtMs: number;
}

export type EventSink = (event: DomainEvent) => Promise<void>;

/**
 * Fans each event out to every registered sink, in registration order. `emit` resolves once
 * every sink has accepted the event (e.g. persisted it), so callers may acknowledge only then.
 */
export class DomainEvents {
  private sinks: EventSink[] = [];

  addSink(sink: EventSink) {
    this.sinks.push(sink);
    return () => {
      this.sinks = this.sinks.filter((s) => s !== sink);
    };
  }

  async emit(event: DomainEvent): Promise<void> {
    for (const sink of this.sinks) await sink(event);
  }

  /**
   * Emits several events and resolves once every sink has accepted all of them. Each sink is
   * called for every event at once, in the array's order (a sink must take them in call order:
   * the webhook outbox writes them together, in that order).
   */
  async emitMany(events: DomainEvent[]): Promise<void> {
    for (const sink of this.sinks) await Promise.all(events.map((event) => sink(event)));
  }
}
