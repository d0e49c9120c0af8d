import type { ApiDeps } from '../../deps.js';
import { connectionsMetadataRoute } from './postConnectionsMetadata.js';

export const patchConnectionsMetadataRoute = (deps: ApiDeps) => connectionsMetadataRoute(deps, 'patch');
