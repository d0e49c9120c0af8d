/**
 * Connection tags, as the de-facto API has them: string values under case-insensitive keys (stored in
 * lower case), at most 10. The deprecated `end_user` of that API is kept as tags as well, under the
 * keys the de-facto API derives from it, so that filters by end user and by tag are one mechanism.
 */
import { z } from 'zod';

export const MAX_TAGS = 10;

const tagKey = z
  .string()
  .max(64, 'tag keys have at most 64 characters')
  .regex(
    /^[a-zA-Z][a-zA-Z0-9_\-./]*$/,
    'tag keys start with a letter and hold letters, digits, underscores, hyphens, periods or slashes',
  );
const tagValue = z.string().min(1, 'tag values are not empty').max(255, 'tag values have at most 255 characters');

export type ConnectionTags = Record<string, string>;

/** Tags as sent: keys in any case, stored lower-cased; two keys that differ only in case are refused. */
export const connectionTagsSchema = z
  .record(tagKey, tagValue)
  .superRefine((tags, ctx) => {
    const keys = Object.keys(tags);
    if (keys.length > MAX_TAGS) ctx.addIssue({ code: 'custom', message: `at most ${MAX_TAGS} tags` });
    const seen = new Set<string>();
    for (const key of keys) {
      const lower = key.toLowerCase();
      if (seen.has(lower)) ctx.addIssue({ code: 'custom', path: [key], message: `duplicate tag key '${lower}'` });
      seen.add(lower);
    }
    const email = Object.entries(tags).find(([key]) => key.toLowerCase() === 'end_user_email')?.[1];
    if (email !== undefined && !z.email().safeParse(email).success) {
      ctx.addIssue({
        code: 'custom',
        path: ['end_user_email'],
        message: 'tag end_user_email must be an email address',
      });
    }
  })
  .transform((tags) => Object.fromEntries(Object.entries(tags).map(([key, value]) => [key.toLowerCase(), value])));

/** The deprecated `end_user` of POST /connections and PATCH /connections/:id. */
export const endUserSchema = z
  .object({
    id: z.string().min(1).max(255),
    email: z.email().optional(),
    display_name: z.string().max(255).optional(),
    tags: z.record(z.string(), z.string()).optional(),
  })
  .strict();
export type EndUserInput = z.output<typeof endUserSchema>;

/**
 * The tags of a connection given `end_user` and `tags` (the explicit tags win), as the de-facto API
 * derives them: `end_user_id`, `end_user_email`, `end_user_display_name`, then the end user's own tags.
 */
export function tagsWithEndUser(endUser: EndUserInput | undefined, tags: ConnectionTags | undefined): ConnectionTags {
  const derived: Record<string, string> = {};
  if (endUser) {
    derived['end_user_id'] = endUser.id;
    if (endUser.email) derived['end_user_email'] = endUser.email;
    if (endUser.display_name) derived['end_user_display_name'] = endUser.display_name;
    for (const [key, value] of Object.entries(endUser.tags ?? {})) derived[key.toLowerCase()] = value;
  }
  return { ...derived, ...tags };
}

export interface EndUserView {
  id: string;
  email: string | null;
  display_name: string | null;
  tags: null;
  organization: { id: string; display_name: string | null } | null;
}

/** The `end_user` the de-facto API shows for a connection, read back from its tags; null without `end_user_id`. */
export function endUserOf(tags: ConnectionTags): EndUserView | null {
  const id = tags['end_user_id'];
  if (id === undefined) return null;
  const organization = tags['organization_id'];
  return {
    id,
    email: tags['end_user_email'] ?? null,
    display_name: tags['end_user_display_name'] ?? null,
    tags: null,
    organization:
      organization === undefined ? null : { id: organization, display_name: tags['organization_display_name'] ?? null },
  };
}
