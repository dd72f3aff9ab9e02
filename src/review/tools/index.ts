export * from './port.js';
export * from './relay.js';
export * from './socket.js';
