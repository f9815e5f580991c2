import { expect } from 'chai';
import {
  authorizationInfo,
  canInAnyContext,
  GLOBAL_CONTEXT,
  isAllowed,
  isSysadmin,
  mayAnywhere,
  mayEverywhere,
  permissionDenied,
  refuseUnlessAnywhere,
  type Principal,
  type SecurityConfig,
} from '../../src/content/permissions.js';
import { loadSecurityConfig, parseSecurityConfig } from '../../src/security/security-config.js';

// CONTRACT §3 "Users, roles, contexts", against the shipped config/security.json.
describe('security: permissions (CONTRACT §3)', () => {
  const cfg: SecurityConfig = loadSecurityConfig();
  const p = (userId: string, contexts: Record<string, string[]>): Principal => ({ userId, contexts });
  const sysadmin = p('sysadmin', { [GLOBAL_CONTEXT]: ['sysadmin'] });
  const editor = p('editor', { [GLOBAL_CONTEXT]: ['editor'] });
  const reader = p('reader', { [GLOBAL_CONTEXT]: ['reader'] });
  const sportseditor = p('sportseditor', { sports: ['editor'] });
  const nobody = p('stranger', {});
  const ALL = ['Create', 'Read', 'Update', 'Delete', 'Write', 'AssignToView'];

  describe('global roles', () => {
    it('editor has every standard permission on any type, in any content context', () => {
      for (const perm of ALL) {
        expect(isAllowed(cfg, editor, perm, 'article', []), perm).to.equal(true);
        expect(isAllowed(cfg, editor, perm, 'image', ['sports']), perm).to.equal(true);
      }
      expect(isAllowed(cfg, editor, 'Publish', 'article', [])).to.equal(false);
    });

    it('reader may only Read', () => {
      expect(isAllowed(cfg, reader, 'Read', 'article', [])).to.equal(true);
      expect(isAllowed(cfg, reader, 'Read', 'article', ['sports'])).to.equal(true);
      for (const perm of ['Create', 'Update', 'Delete', 'Write', 'AssignToView']) {
        expect(isAllowed(cfg, reader, perm, 'article', []), perm).to.equal(false);
      }
    });

    it('sysadmin: the * permission grants every permission, custom names included', () => {
      for (const perm of [...ALL, 'Publish', 'SomethingCustom']) {
        expect(isAllowed(cfg, sysadmin, perm, 'anyType', ['elsewhere']), perm).to.equal(true);
      }
    });

    it('a principal without roles may do nothing', () => {
      expect(isAllowed(cfg, nobody, 'Read', 'article', [])).to.equal(false);
      expect(canInAnyContext(cfg, nobody, 'Read', 'article')).to.equal(false);
    });
  });

  describe('context roles', () => {
    it('sportseditor may edit content owned by sports only', () => {
      expect(isAllowed(cfg, sportseditor, 'Update', 'article', ['sports'])).to.equal(true);
      expect(isAllowed(cfg, sportseditor, 'Update', 'article', ['news', 'sports'])).to.equal(true);
      expect(isAllowed(cfg, sportseditor, 'Update', 'article', ['news'])).to.equal(false);
    });

    it('content without owners is in __global__ only', () => {
      expect(isAllowed(cfg, sportseditor, 'Read', 'article', [])).to.equal(false);
    });

    it('naming __global__ among the content contexts grants nothing extra', () => {
      expect(isAllowed(cfg, sportseditor, 'Read', 'article', [GLOBAL_CONTEXT])).to.equal(false);
    });

    it('canInAnyContext: sportseditor could create somewhere, reader nowhere', () => {
      expect(canInAnyContext(cfg, sportseditor, 'Create', 'article')).to.equal(true);
      expect(canInAnyContext(cfg, reader, 'Create', 'article')).to.equal(false);
      expect(canInAnyContext(cfg, reader, 'Read', 'article')).to.equal(true);
    });
  });

  describe('mayAnywhere: a write refused before its body is read (request-auth.ts)', () => {
    const typed: SecurityConfig = {
      roles: { ...cfg.roles, imageDesk: { image: ['Create'], '*': ['Read'] }, custom: { article: ['Publish'] }, all: { video: ['*'] } },
    };
    const desk = p('desk', { culture: ['imageDesk'] });
    const publisher = p('publisher', { sports: ['custom'], [GLOBAL_CONTEXT]: ['reader'] });
    const wild = p('wild', { culture: ['all'] });
    // An own key `__proto__` (as JSON.parse makes one) is a context like any other.
    const ghost = p('ghost', JSON.parse('{"sports": ["no-such-role"], "__proto__": ["reader"]}') as Record<string, string[]>);
    const people = [sysadmin, editor, reader, sportseditor, nobody, desk, publisher, wild, ghost];
    const perms = [...ALL, 'Publish', 'Other'];

    it('is false exactly when no check of the permission can pass, whatever the type and contexts', () => {
      const types = ['article', 'image', 'video', 'other', '*'];
      const contexts = [[], ['sports'], ['culture'], ['sports', 'culture'], [GLOBAL_CONTEXT]];
      for (const who of people)
        for (const perm of perms) {
          const somewhere = types.some((t) => canInAnyContext(typed, who, perm, t) || contexts.some((c) => isAllowed(typed, who, perm, t, c)));
          expect(mayAnywhere(typed, who, perm), `${who.userId} ${perm}`).to.equal(somewhere);
        }
    });

    it('mayEverywhere (an export reads versions with snapshots) is true only where every check of the permission passes, whatever the type and contexts', () => {
      const types = ['article', 'image', 'video', 'other', 'constructor', '*'];
      const contexts = [[], ['sports'], ['culture'], ['sports', 'culture'], [GLOBAL_CONTEXT], ['__proto__']];
      const everywhereGlobal = p('everywhere', { [GLOBAL_CONTEXT]: ['imageDesk'] });
      for (const who of [...people, everywhereGlobal])
        for (const perm of perms) {
          const everywhere = types.every((t) => contexts.every((c) => isAllowed(typed, who, perm, t, c)));
          // Always sound; and exact for the principals here (no set of type grants covers every type).
          if (mayEverywhere(typed, who, perm)) expect(everywhere, `${who.userId} ${perm}`).to.equal(true);
          expect(mayEverywhere(typed, who, perm), `${who.userId} ${perm}`).to.equal(everywhere);
        }
      expect(mayEverywhere(cfg, editor, 'Read')).to.equal(true);
      expect(mayEverywhere(cfg, reader, 'Read')).to.equal(true);
      expect(mayEverywhere(cfg, sportseditor, 'Read')).to.equal(false);
      expect(mayEverywhere(typed, desk, 'Read')).to.equal(false);
      expect(mayEverywhere(typed, everywhereGlobal, 'Read')).to.equal(true);
    });

    it('refuses with the 403 of the first permission named when none is held anywhere', () => {
      expect(refuseUnlessAnywhere(cfg, reader, ['Create'])?.http).to.equal(403);
      expect(refuseUnlessAnywhere(cfg, reader, ['Create', 'Update'])?.message).to.equal('Create denied for reader');
      expect(refuseUnlessAnywhere(cfg, sportseditor, ['Update'])).to.equal(undefined);
      expect(refuseUnlessAnywhere(typed, desk, ['Update', 'Create'])).to.equal(undefined);
      expect(refuseUnlessAnywhere(typed, desk, ['Update'])?.http).to.equal(403);
      expect(refuseUnlessAnywhere(cfg, nobody, ['Update'])?.http).to.equal(403);
    });
  });

  describe('type-specific grants', () => {
    const typed: SecurityConfig = {
      roles: {
        imageDesk: { image: ['Create', 'Update'], '*': ['Read'] },
        custom: { article: ['Publish'] },
      },
    };
    const desk = p('desk', { [GLOBAL_CONTEXT]: ['imageDesk'], culture: ['custom'] });

    it('a grant on a type applies to that type only; a grant on * to every type', () => {
      expect(isAllowed(typed, desk, 'Update', 'image', [])).to.equal(true);
      expect(isAllowed(typed, desk, 'Update', 'article', [])).to.equal(false);
      expect(isAllowed(typed, desk, 'Read', 'article', [])).to.equal(true);
    });

    it('custom permission names are granted like the standard ones', () => {
      expect(isAllowed(typed, desk, 'Publish', 'article', ['culture'])).to.equal(true);
      expect(isAllowed(typed, desk, 'Publish', 'article', ['sports'])).to.equal(false);
      expect(isAllowed(typed, desk, 'Publish', 'image', ['culture'])).to.equal(false);
    });

    it('type and context names never reach Object.prototype', () => {
      for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
        expect(isAllowed(typed, desk, 'Update', name, [name]), name).to.equal(false);
        expect(isAllowed(typed, p('x', { [GLOBAL_CONTEXT]: [name] }), 'Read', 'article', [])).to.equal(false);
      }
    });

    it('an undefined role grants nothing', () => {
      expect(isAllowed(typed, p('x', { [GLOBAL_CONTEXT]: ['ghost'] }), 'Read', 'article', [])).to.equal(false);
    });
  });

  describe('isSysadmin', () => {
    it('needs the sysadmin role in __global__', () => {
      expect(isSysadmin(sysadmin)).to.equal(true);
      expect(isSysadmin(editor)).to.equal(false);
      expect(isSysadmin(p('x', { sports: ['sysadmin'] }))).to.equal(false);
    });
  });

  describe('authorizationInfo (spec: Authorization information response)', () => {
    it('lists the contexts and only the roles held, role -> type -> permissions', () => {
      expect(authorizationInfo(cfg, sportseditor)).to.deep.equal({
        contexts: { sports: ['editor'] },
        roles: { editor: { '*': ALL } },
      });
      expect(authorizationInfo(cfg, reader)).to.deep.equal({
        contexts: { [GLOBAL_CONTEXT]: ['reader'] },
        roles: { reader: { '*': ['Read'] } },
      });
      expect(authorizationInfo(cfg, nobody)).to.deep.equal({ contexts: {}, roles: {} });
    });

    it('returns copies: changing the answer changes neither config nor principal', () => {
      const info = authorizationInfo(cfg, editor);
      info.roles.editor['*'].push('Hack');
      info.contexts[GLOBAL_CONTEXT].push('sysadmin');
      expect(isAllowed(cfg, editor, 'Hack', 'article', [])).to.equal(false);
      expect(editor.contexts[GLOBAL_CONTEXT]).to.deep.equal(['editor']);
    });
  });

  describe('refusals (CONTRACT §20 "Error bodies")', () => {
    it('permissionDenied names the permission and the user, and nothing of the content: a 403 in the error registry', () => {
      const e = permissionDenied('Update', sportseditor);
      expect(e.message).to.equal('Update denied for sportseditor');
      expect(e.http).to.equal(403);
      expect(e.toBody()).to.deep.equal({ message: 'Update denied for sportseditor', statusCode: '40300', extraInfo: {} });
    });
  });

  describe('config/security.json', () => {
    it('holds the development accounts with hashed passwords and their contexts', () => {
      const full = loadSecurityConfig();
      expect(Object.keys(full.users).sort()).to.deep.equal(['editor', 'reader', 'sportseditor', 'sysadmin']);
      expect(full.users.sportseditor.contexts).to.deep.equal({ sports: ['editor'] });
      for (const [name, u] of Object.entries(full.users)) {
        expect(u.passwordHash, name).to.match(/^scrypt\$\d+\$\d+\$\d+\$[^$]+\$[^$]+$/);
        expect(u.passwordHash).not.to.include(name);
      }
    });

    it('refuses plaintext passwords and unknown roles', () => {
      expect(() => parseSecurityConfig({ roles: {}, users: { a: { passwordHash: 'a', contexts: {} } } })).to.throw(/passwordHash/);
      const hash = loadSecurityConfig().users.editor.passwordHash;
      expect(() => parseSecurityConfig({ roles: {}, users: { a: { passwordHash: hash, contexts: { x: ['ghost'] } } } })).to.throw(/unknown role "ghost"/);
    });
  });
});
