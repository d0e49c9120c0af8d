// Written by scripts/dashboardApiTypes.ts from src/client/index.ts (the routes' schemas): do not edit.
// `npm run typecheck` writes it again before checking the dashboard.
declare namespace Api {
  type ConnectionRecord = {
    id: number;
    created_at: string;
    updated_at: string;
    provider_config_key: string;
    connection_id: string;
    credentials: Record<string, unknown>;
    connection_config: Record<string, string>;
    account_id: number;
    metadata: Record<string, unknown>;
    provider: string;
    tags: Record<string, string>;
    errors: { type: 'auth' | 'sync'; log_id: string }[];
    end_user: {
      id: string;
      email: string | null;
      display_name: string | null;
      tags: null;
      organization: { id: string; display_name: string | null } | null;
    } | null;
    last_fetched_at: string | null;
    webhook_url_override: null;
    refresh_error: { code: string; message: string; at: string; permanent: boolean } | null;
    needs_reauth: boolean;
  };
  type ConnectionSummary = {
    id: number;
    connection_id: string;
    provider_config_key: string;
    provider: string;
    created: string;
    metadata: Record<string, unknown> | null;
    tags: Record<string, string>;
    errors: { type: 'auth' | 'sync'; log_id: string }[];
    end_user: {
      id: string;
      email: string | null;
      display_name: string | null;
      tags: null;
      organization: { id: string; display_name: string | null } | null;
    } | null;
    auth_mode: string;
    created_at: string;
    updated_at: string;
    refresh_error: { code: string; message: string; at: string; permanent: boolean } | null;
    needs_reauth: boolean;
  };
  type EnvironmentVariable = { name: string; value: string };
  type EnvironmentView = { id: string; name: string; public_key: string; created_at: string };
  type Integration = {
    unique_key: string;
    provider: string;
    display_name: string;
    forward_webhooks: false;
    created_at: string;
    updated_at: string;
    provider_settings: Record<string, unknown>;
    webhook: {
      has_secret: boolean;
      signature_header: string;
      timestamp_header: string;
      tolerance_seconds: number;
      type_header: string | null;
      type_path: string;
      connection_path: string | null;
      connection_field: string;
    } | null;
    webhook_url?: string | undefined;
    credentials?:
      | {
          type: string;
          client_id: string;
          client_secret: null;
          has_client_secret: boolean;
          scopes: string | null;
          webhook_secret: null;
        }
      | null
      | undefined;
  };
  type LogLine = {
    id: string;
    integration_id: string;
    connection_id: string;
    script_kind: 'sync' | 'action';
    script_name: string;
    run_id: string;
    level: string;
    message: string;
    logged_at: string;
  };
  type SyncRun = {
    run_id: string;
    sync: string;
    connection_id: string;
    mode: string;
    status: 'success' | 'failed';
    started_at: string;
    finished_at: string;
    duration_ms: number;
    models: Record<string, { added: number; updated: number; deleted: number; unchanged: number }>;
    error: { code: string; message: string } | null;
    executions: string[];
  };
  type SyncStatus = {
    id: string;
    connection_id: string;
    name: string;
    status: 'RUNNING' | 'PAUSED' | 'STOPPED' | 'SUCCESS' | 'ERROR';
    type: 'INCREMENTAL' | 'INITIAL';
    sync_type: 'incremental' | 'full';
    checkpoint: Record<string, string | number | boolean> | null;
    finishedAt: string | null;
    nextScheduledSyncAt: string | null;
    frequency: string;
    frequencyMs: number;
    frequency_overridden: boolean;
    latestResult: Record<string, { added: number; updated: number; deleted: number; unchanged: number }> | null;
    latestError: { code: string; message: string } | null;
    recordCount: Record<string, number>;
  };
  type WebhookDelivery = {
    id: string;
    event_type: string;
    integration_id: string | null;
    connection_id: string | null;
    sync_name: string | null;
    model: string | null;
    url: string;
    payload: unknown;
    status: 'failed' | 'pending' | 'delivered';
    attempts: number;
    last_status_code: number | null;
    last_error: string | null;
    created_at: string;
    last_attempt_at: string | null;
    delivered_at: string | null;
  };
}
