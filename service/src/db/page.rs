//! Pages of a list: no route answers more than [`MAX`] items at once. A page is
//! read with one row more than asked, which says whether another page follows
//! without counting the rest; the caller names where the next page starts (a name
//! or a number, the last one of this page) and the next request passes it back.

/// Items in a page unless asked otherwise.
pub const DEFAULT: u64 = 100;
/// The most one page holds.
pub const MAX: u64 = 1_000;

/// A page of a list ordered by name: `limit` items (1 to 1,000; 100 unless given)
/// whose names sort after `after` (the previous page's `next_after`).
#[derive(Debug, Default, Clone)]
pub struct ByName {
    pub limit: Option<u64>,
    pub after: Option<String>,
}

/// A page of a list ordered by a number: `limit` items (1 to 1,000; 100 unless
/// given) after (ascending lists) or before (descending lists) `cursor`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ByNumber {
    pub limit: Option<u64>,
    pub cursor: Option<i32>,
}

/// Cuts `rows` (read with `limit + 1`) to the page, and the cursor of the next page
/// (`key` of its last item) when one more row was there.
pub fn cut<T, K>(mut rows: Vec<T>, limit: u64, key: impl Fn(&T) -> K) -> (Vec<T>, Option<K>) {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    if rows.len() <= limit {
        return (rows, None);
    }
    rows.truncate(limit);
    let next = rows.last().map(key);
    (rows, next)
}

/// A `LIKE` pattern for names that contain `text` (lowercased, as names are; `%`,
/// `_` and a backslash in it match themselves).
pub fn contains(text: &str) -> sea_orm::sea_query::LikeExpr {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    sea_orm::sea_query::LikeExpr::new(pattern).escape('\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_cut_and_names_where_the_next_starts() {
        assert_eq!(cut(vec![1, 2, 3], 2, |n| *n), (vec![1, 2], Some(2)));
        assert_eq!(cut(vec![1, 2], 2, |n| *n), (vec![1, 2], None));
        assert_eq!(cut(Vec::<i32>::new(), 2, |n| *n), (vec![], None));
    }
}
