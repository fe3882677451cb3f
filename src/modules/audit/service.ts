import { and, desc, eq, gte, lt, lte, or, type SQL } from 'drizzle-orm'
import type { Database, Queryable } from '../../db/client'
import { auditEvents, type AuditEventRow } from '../../db/schema'
import { decodeIdCursor, encodeIdCursor } from '../../http/pagination'
import type { ClientInfo } from '../../http/request-context'
import type { Logger } from '../../log'
import type { AuditEventResource, AuditEventType, ListAuditEventsQuery } from './model'

export type { AuditEventType }

// Defined where requests are read (http/request-context); every module that records an event names it from here.
export type { ClientInfo } from '../../http/request-context'

export interface AuditEntry {
	actorId?: string | null
	subjectId?: string | null
	details?: Record<string, string | number | boolean | null>
}

export class AuditLog {
	constructor(
		private readonly db: Database,
		private readonly log: Logger,
		/** Told of every event, written or not (metrics count login outcomes here). */
		private readonly onEvent?: (type: AuditEventType) => void,
	) {}

	/**
	 * Appends an event. Never throws: losing an audit row is logged, but must
	 * not fail (or undo) the request it describes. Callers pass ids and
	 * reasons only — never a password, token or hash.
	 */
	async record(type: AuditEventType, client: ClientInfo, entry: AuditEntry = {}): Promise<void> {
		this.onEvent?.(type)
		try {
			await this.db.insert(auditEvents).values(auditRow(type, client, entry))
		} catch (error) {
			this.log.warn({ type, requestId: client.requestId, code: (error as { code?: unknown }).code }, 'audit event not written')
		}
	}

	/**
	 * Appends an event within the caller's transaction: it exists exactly when the change it records commits
	 * (a failure to write it fails the change). For admin changes whose record must not go missing.
	 */
	async recordIn(tx: Queryable, type: AuditEventType, client: ClientInfo, entry: AuditEntry = {}): Promise<void> {
		this.onEvent?.(type)
		await tx.insert(auditEvents).values(auditRow(type, client, entry))
	}

	/** Newest first; keyset on the time-ordered id. */
	async list(query: ListAuditEventsQuery) {
		const limit = query.limit ?? 50
		const before = query.cursor === undefined ? undefined : decodeIdCursor(query.cursor)
		const rows = await this.db
			.select()
			.from(auditEvents)
			.where(and(...filters(query), before === undefined ? undefined : lt(auditEvents.id, before)))
			.orderBy(desc(auditEvents.id))
			.limit(limit + 1)
		const items = rows.slice(0, limit)
		const last = items.at(-1)
		return {
			items: items.map(toAuditEventResource),
			nextCursor: rows.length > limit && last ? encodeIdCursor(last.id) : null,
			limit,
		}
	}
}

const auditRow = (type: AuditEventType, client: ClientInfo, entry: AuditEntry) => ({
	id: Bun.randomUUIDv7(),
	type,
	actorId: entry.actorId ?? null,
	subjectId: entry.subjectId ?? null,
	ip: client.ip,
	userAgent: client.userAgent?.slice(0, 512) ?? null,
	requestId: client.requestId,
	details: entry.details ?? {},
})

function filters(query: ListAuditEventsQuery): Array<SQL | undefined> {
	return [
		query.userId === undefined ? undefined : or(eq(auditEvents.subjectId, query.userId), eq(auditEvents.actorId, query.userId)),
		query.type === undefined ? undefined : eq(auditEvents.type, query.type),
		query.occurredAfter === undefined ? undefined : gte(auditEvents.occurredAt, new Date(query.occurredAfter)),
		query.occurredBefore === undefined ? undefined : lte(auditEvents.occurredAt, new Date(query.occurredBefore)),
	]
}

function toAuditEventResource(row: AuditEventRow): AuditEventResource {
	return {
		id: row.id,
		type: row.type as AuditEventType,
		occurredAt: row.occurredAt.toISOString(),
		actorId: row.actorId,
		subjectId: row.subjectId,
		ip: row.ip,
		userAgent: row.userAgent,
		requestId: row.requestId,
		details: row.details,
	}
}
