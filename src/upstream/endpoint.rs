//! Which operation an upstream call is: its [`Endpoint`], named after its route, the `endpoint`
//! label value. Each collector declares the operations it calls as constants, each with its route
//! template, stated once: the request of a call is made from the template
//! ([`Endpoint::get`], [`Endpoint::post`]), and a target's debug trail names the template in
//! place of the URL.

use std::fmt;

use serde_json::Value;

/// An upstream operation, named after its route: the `endpoint` label value. Each collector
/// declares the operations it calls as constants, so the set is fixed by the code. It carries its
/// route template (`GET /api/delivery/accounts/{id}`), which a target's debug trail names in place
/// of the URL; two endpoints are the same when their names are.
#[derive(Clone, Copy, Debug)]
pub struct Endpoint {
    name: &'static str,
    route: &'static str,
}

impl Endpoint {
    /// An operation named `name` (lower case and `_`, as a label value).
    pub const fn new(name: &'static str) -> Endpoint {
        Endpoint { name, route: "" }
    }

    /// This operation with its route template: the method and the path with its parameters
    /// named, never their values.
    pub const fn at(self, route: &'static str) -> Endpoint {
        Endpoint { route, ..self }
    }

    pub fn as_str(self) -> &'static str {
        self.name
    }

    /// The route template; the name where none was given.
    pub fn route(self) -> &'static str {
        if self.route.is_empty() {
            self.name
        } else {
            self.route
        }
    }
}

impl PartialEq for Endpoint {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Endpoint {}

impl std::hash::Hash for Endpoint {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl PartialOrd for Endpoint {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Endpoint {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name.cmp(other.name)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Endpoint {
    /// `GET` of this endpoint's route template with `params` in its `{...}` in order, and the
    /// query the template states.
    pub fn get(self, params: &[&str]) -> Route {
        self.fill(params, None)
    }

    /// `POST` of this endpoint's route template with a JSON body (a read: the dashboard is asked
    /// for with a body).
    pub fn post(self, params: &[&str], body: Value) -> Route {
        self.fill(params, Some(body))
    }

    /// The template's path with `params` in its `{...}` in order (a missing one left empty),
    /// its query pairs, and `body`.
    fn fill(self, params: &[&str], body: Option<Value>) -> Route {
        let template = self.route();
        let target = template.split_once(' ').map_or(template, |(_, t)| t);
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut out = String::with_capacity(path.len() + 16);
        let mut params = params.iter();
        let mut rest = path;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
            out.push_str(params.next().copied().unwrap_or(""));
            rest = &rest[close..];
        }
        out.push_str(rest);
        let query = query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .collect();
        Route {
            path: out,
            query,
            body,
        }
    }
}

/// One upstream operation as a collector asks for it: a path under the API's base address, its
/// query, and for a POST its JSON body. The client adds the address, the token and the rest. A
/// collector makes it from its endpoint's route template ([`Endpoint::get`]).
#[derive(Clone, Debug)]
pub struct Route {
    pub(super) path: String,
    pub(super) query: Vec<(&'static str, &'static str)>,
    pub(super) body: Option<Value>,
}

#[cfg(test)]
impl Route {
    /// The method, path and query, as a template reads (for tests).
    pub fn describe(&self) -> String {
        let method = if self.body.is_some() { "POST" } else { "GET" };
        let query: Vec<String> = self.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if query.is_empty() {
            format!("{method} {}", self.path)
        } else {
            format!("{method} {}?{}", self.path, query.join("&"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_made_from_the_route_template_stated_once() {
        let e = Endpoint::new("mailbox").at("GET /api/domains/{domain}/email_accounts/{code}");
        assert_eq!(
            e.get(&["D1", "EA1"]).describe(),
            "GET /api/domains/D1/email_accounts/EA1"
        );
        let daily =
            Endpoint::new("d").at("GET /api/delivery/tracemail/daily/{account}?type=domains-rank");
        assert_eq!(
            daily.get(&["7"]).describe(),
            "GET /api/delivery/tracemail/daily/7?type=domains-rank"
        );
        let post = Endpoint::new("p").at("POST /api/delivery/tracemail/dashboard");
        assert_eq!(
            post.post(&[], serde_json::json!({})).describe(),
            "POST /api/delivery/tracemail/dashboard"
        );
    }
}
